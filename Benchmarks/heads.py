#!/usr/bin/env python3
"""Unfinished heads: what a relay keeps for connections whose request head never ends.

Starts `linkrelay serve --store memory` on a free loopback port, reads its resident memory at rest,
then opens --count connections from one address (127.0.0.1), each sending --head-bytes of a request
head (a request line, Host, and padding headers of about 1 KiB each) without the blank line that ends
it. The relay's memory is read once every connection's head has been read (its RSS stops growing),
the connections are checked to be still open, then all are closed and the memory is read again
--after seconds later (60 by default: "a minute after they close").

The header timeout is raised to 600 s for the run, and the per-address connection cap to --count
plus a few, so that neither closes the heads while they are measured (`linkrelay serve --help`).

    python3 Benchmarks/heads.py --bin .build/release/linkrelay
    python3 Benchmarks/heads.py --bin .build/release/linkrelay --malloc-tuning off
    python3 Benchmarks/heads.py --bin /path/to/old/linkrelay      # the before, same sitting
    python3 Benchmarks/heads.py --bin .build/release/linkrelay --padding Origin --head-bytes 16000
                                                   # the most of a head the relay keeps: 16 KiB of lines it reads

Prints one JSON object: rss_idle_mib, rss_open_mib, rss_after_mib, open (connections still open when
measured), after_vs_idle (rss_after / rss_idle). Needs nothing beyond Python 3's standard library.
"""
import argparse, json, os, resource, socket, subprocess, sys, time, urllib.request


def rss_mib(pid):
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def head(size, padding):
    """A request head of `size` bytes that stops before its blank line, padded with `padding` lines."""
    text = "GET /healthz HTTP/1.1\r\nHost: relay.example\r\n"
    index = 0
    while len(text) < size:
        line = f"{padding}: " if padding != "X-Pad" else f"X-Pad-{index:03}: "
        room = size - len(text) - len(line) - 2
        if room <= 0:
            break
        text += line + "a" * min(1000, room) + "\r\n"
        index += 1
    return text.encode()


def settle(pid, seconds=30):
    """Waits until the process's RSS has not grown for 2 s (at most `seconds`); returns it."""
    deadline = time.monotonic() + seconds
    last, stable_since = rss_mib(pid), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = rss_mib(pid)
        if now > last + 0.5:
            last, stable_since = now, time.monotonic()
        elif time.monotonic() - stable_since >= 2:
            break
    return rss_mib(pid)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=".build/release/linkrelay")
    parser.add_argument("--count", type=int, default=1800)
    parser.add_argument("--head-bytes", type=int, default=32 * 1024 - 256,
                        help="bytes of each unfinished head (default just under the relay's 32 KiB)")
    parser.add_argument("--padding", default="X-Pad",
                        help="the padding lines' header: X-Pad (numbered, lines the relay drops) or one it keeps, "
                             "such as Origin, with --head-bytes 16000 (the most it keeps of a head)")
    parser.add_argument("--after", type=float, default=60, help="seconds after the close to read memory again")
    parser.add_argument("--malloc-tuning", choices=["on", "off"], default="on")
    args = parser.parse_args()

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = min(hard, max(soft, 4 * args.count + 2048))
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))

    port = free_port()
    command = [
        args.bin, "serve", "--store", "memory", "--host", "127.0.0.1", "--port", str(port),
        "--max-connections", str(args.count + 100), "--limit-connections-per-address", str(args.count + 50),
        "--header-timeout", "600", "--malloc-tuning", args.malloc_tuning, "--api-key", "heads-bench-key-0123456789",
    ]
    relay = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        else:
            sys.exit("the relay did not start")
        time.sleep(2)
        idle = rss_mib(relay.pid)

        payload = head(args.head_bytes, args.padding)
        connections = []
        for _ in range(args.count):
            connection = socket.create_connection(("127.0.0.1", port))
            connection.sendall(payload)
            connections.append(connection)
        opened = settle(relay.pid)
        # Still open: a closed connection reads as EOF (b"") or an answer; an open one has nothing.
        still_open = 0
        for connection in connections:
            connection.setblocking(False)
            try:
                still_open += 0 if connection.recv(1) is not None else 1
            except BlockingIOError:
                still_open += 1
            except OSError:
                pass
        for connection in connections:
            connection.close()
        time.sleep(args.after)
        after = rss_mib(relay.pid)
        print(json.dumps({
            "bin": args.bin, "malloc_tuning": args.malloc_tuning, "count": args.count,
            "head_bytes": len(payload), "padding": args.padding, "open": still_open, "rss_idle_mib": round(idle, 1),
            "rss_open_mib": round(opened, 1), "rss_after_mib": round(after, 1),
            "after_vs_idle": round(after / idle, 3),
        }))
    finally:
        relay.terminate()
        try:
            relay.wait(timeout=30)
        except subprocess.TimeoutExpired:
            relay.kill()


if __name__ == "__main__":
    main()
