#!/usr/bin/env python3
"""Each second, the CPU each process on the machine used in it, in cores, by name: which process of a
benchmark takes how much of the cores it shares (two relays, PostgreSQL, a webhook receiver, the harness).

    python3 Benchmarks/cpushare.py record OUT &    # until killed; one JSON line per second
    ... run the benchmark ...
    kill %1
    python3 Benchmarks/cpushare.py print OUT [--above 0.3] [--seconds 12-20]

A relay is named by its subcommand and, for `serve`, its port (`linkrelay serve 18801`); a Python script
by its file; PostgreSQL's backends add up under `postgres`. Kernel threads are left out.
`print` shows the seconds whose total is over --above (cores), then the mean of each name over them, or
over the seconds --seconds names (a benchmark's taps, say, without its opening).
"""
import argparse
import collections
import json
import os
import time

TICKS = os.sysconf("SC_CLK_TCK")


def process(pid: str) -> tuple[str, float] | None:
    """The process's name and the CPU seconds it has used; None for a kernel thread."""
    with open(f"/proc/{pid}/stat") as f:
        stat = f.read()
    with open(f"/proc/{pid}/cmdline") as f:
        argv = f.read().split("\0")
    if not argv[0]:
        return None
    comm, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat[stat.rindex(")") + 2 :].split()
    seconds = (int(fields[11]) + int(fields[12])) / TICKS  # utime + stime
    if comm.startswith("python"):
        return (os.path.basename(argv[1]) if len(argv) > 1 else comm), seconds
    if len(argv) > 1 and argv[1] in ("serve", "sandbox"):
        port = argv[argv.index("--port") + 1] if "--port" in argv[:-1] else ""
        return f"linkrelay {argv[1]} {port}".rstrip(), seconds
    return comm, seconds


def sample() -> collections.Counter:
    used = collections.Counter()
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            found = process(pid)
        except (OSError, ValueError, IndexError):
            continue  # gone meanwhile
        if found:
            used[found[0]] += found[1]
    return used


def record(path: str) -> None:
    before = sample()
    with open(path, "w") as out:
        while True:
            time.sleep(1)
            now = sample()
            second = {name: round(now[name] - before.get(name, 0), 2) for name in now}
            out.write(json.dumps({k: v for k, v in second.items() if v > 0.005}) + "\n")
            out.flush()
            before = now


def show(path: str, above: float, chosen: range | None) -> None:
    busy = []
    with open(path) as f:
        for index, line in enumerate(f):
            second = json.loads(line)
            total = sum(second.values())
            if total > above if chosen is None else index in chosen:
                busy.append(second)
                top = sorted(second.items(), key=lambda item: -item[1])[:6]
                print(f"{index:4d}s  {total:.2f}  " + ", ".join(f"{name} {cores:.2f}" for name, cores in top))
    if busy:
        names = sorted({name for second in busy for name in second})
        means = {name: sum(second.get(name, 0) for second in busy) / len(busy) for name in names}
        print(f"mean over {len(busy)} s: " + ", ".join(
            f"{name} {cores:.2f}" for name, cores in sorted(means.items(), key=lambda item: -item[1]) if cores >= 0.01))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("mode", choices=["record", "print"])
    parser.add_argument("path")
    parser.add_argument("--above", type=float, default=0.3, help="print: seconds whose total is over this, in cores")
    parser.add_argument("--seconds", default="", help="print: these seconds only, FIRST-LAST (as numbered)")
    args = parser.parse_args()
    if args.mode == "record":
        record(args.path)
    else:
        first, _, last = args.seconds.partition("-")
        show(args.path, args.above, range(int(first), int(last or first) + 1) if first else None)


if __name__ == "__main__":
    main()
