#!/usr/bin/env python3
"""Where a process's threads wait in the kernel (uninterruptible sleep: disk, page locks), from a
system-wide record of the scheduler's switches with kernel call chains.

  perf record -e sched:sched_switch -g -a -o offcpu.perf.data -- sleep 6
  Benchmarks/offcpu.py offcpu.perf.data [--pid PID]

Each wait runs from the switch that put a thread to sleep in state D to the switch that next ran it,
which is why the record must be system-wide (`-a`): a thread is mostly switched in from another
process, or from idle. Waits are grouped by thread and by the system call and kernel function that
waited (`fsync/blkdev_issue_flush`: a flush of the disk's cache), and printed longest total first.
`Benchmarks/loadcost.sh [transport] [BIN] --offcpu` records and prints this for the relay under load.
"""
import argparse, collections, os, re, subprocess

# The first of these found in a wait's call chain, innermost first, names it.
SYSCALLS = ("fsync", "fdatasync", "__libc_pwrite", "__libc_pread", "__libc_write", "__GI___writev", "__libc_fcntl64")
WAITS = (
    "blkdev_issue_flush", "folio_wait_writeback", "folio_wait_stable", "folio_wait_bit_common",
    "ext4_block_write_begin", "__sync_dirty_buffer", "balance_dirty_pages", "rq_qos_wait", "filemap_read",
)
SWITCH = re.compile(r"^\s*(\d+)\s+([\d.]+):.*prev_comm=(.*?) prev_pid=(\d+) .*prev_state=(\S+) ==> .*next_pid=(\d+)")


def switches(path):
    """Yields (time, thread name, thread id, its state, the thread switched in, call chain)."""
    script = subprocess.run(
        ["perf", "script", "-i", path, "-F", "tid,time,trace,ip,sym"], capture_output=True, text=True, check=True
    ).stdout
    current = None
    for line in script.splitlines():
        match = SWITCH.match(line)
        if match:
            if current:
                yield current
            _, time, comm, prev, state, nxt = match.groups()
            current = (float(time), comm, int(prev), state, int(nxt), [])
        elif current and line.strip():
            current[5].append(line.split()[1].split("+")[0])
    if current:
        yield current


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("data", nargs="?", default="offcpu.perf.data")
    p.add_argument("--pid", type=int, help="only the threads of this (running) process")
    args = p.parse_args()
    threads = {int(t) for t in os.listdir(f"/proc/{args.pid}/task")} if args.pid else None

    asleep = {}  # thread id -> (when it went to sleep, its name, what it waits for)
    waits = collections.defaultdict(list)
    for time, comm, prev, state, nxt, chain in switches(args.data):
        if state.startswith("D") and (threads is None or prev in threads):
            syscall = next((f for f in chain if f in SYSCALLS), "?")
            wait = next((f for f in chain if f in WAITS), chain[2] if len(chain) > 2 else "?")
            asleep[prev] = (time, comm, f"{syscall}/{wait}")
        if nxt in asleep:
            start, comm, what = asleep.pop(nxt)
            waits[(comm, what)].append((time - start) * 1000)
    print(f"{'thread':18} {'system call / kernel wait':44} {'waits':>6} {'total ms':>9} {'max ms':>8} {'over 1 ms':>9}")
    for (comm, what), ms in sorted(waits.items(), key=lambda item: -sum(item[1])):
        print(f"{comm:18} {what:44} {len(ms):6} {sum(ms):9.1f} {max(ms):8.2f} {sum(m > 1 for m in ms):9}")


if __name__ == "__main__":
    main()
