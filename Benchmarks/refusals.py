#!/usr/bin/env python3
"""Equal refusals (API.md v1.3): does a wrong token on an existing session's id answer like, and as
fast as, an id no session has?

Starts `linkrelay serve` (SQLite in a temporary directory, embedded sandbox, --limits off so that no
limiter answers in its place), creates one session, then sends --pairs interleaved pairs of
`GET /v1/sessions/{id}/poll?token=<wrong>&timeout=0`: (a) the session's ("foreign") id with a wrong
token, (b) a random unknown id of the same shape, a new one per pair, the order alternating from pair
to pair, all over one keep-alive connection (http.client). Each answer is timed from the request's
send to the end of its body. Prints the statuses seen, the medians, and the share of pairs in which
the foreign answer came first (the contract's target: 40-60%).

  Benchmarks/refusals.py --bin .build/release/linkrelay [--pairs 1000] [--store memory]

Needs only Python's standard library.
"""

import argparse
import collections
import http.client
import json
import os
import re
import secrets
import statistics
import subprocess
import sys
import tempfile
import time

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
WARM_UP = 50  # pairs sent first and not counted: the connection, caches and code paths warm


def start(binary, directory, store, key):
    log_path = os.path.join(directory, "relay.log")
    log = open(log_path, "w")
    store_flag = "memory" if store == "memory" else f"sqlite:{directory}/relay.sqlite"
    child = subprocess.Popen(
        [binary, "serve", "--host", "127.0.0.1", "--port", "0", "--store", store_flag, "--api-key", key,
         "--limits", "off", "--drain-delay", "0"], stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with open(log_path) as text:
            found = re.search(r"public_url=http://127\.0\.0\.1:(\d+)\S* .*LinkRelay listening", text.read())
        if found:
            return child, int(found.group(1))
        if child.poll() is not None:
            sys.exit(f"the relay exited with {child.returncode}:\n" + open(log_path).read())
        time.sleep(0.05)
    child.kill()
    sys.exit("the relay did not start in 30 s:\n" + open(log_path).read())


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bin", default=".build/release/linkrelay")
    parser.add_argument("--pairs", type=int, default=1000)
    parser.add_argument("--store", choices=["sqlite", "memory"], default="sqlite")
    arguments = parser.parse_args()
    key = "bench-" + secrets.token_hex(16)
    with tempfile.TemporaryDirectory() as directory:
        child, port = start(arguments.bin, directory, arguments.store, key)
        try:
            measure(port, key, arguments.pairs)
        finally:
            child.terminate()
            child.wait(timeout=30)


def measure(port, key, pairs):
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    connection.request("POST", "/v1/sessions", json.dumps({"phoneNumber": "2001004014", "holdSeconds": 600}),
                       {"Authorization": f"Bearer {key}", "Content-Type": "application/json"})
    answer = connection.getresponse()
    session = json.loads(answer.read())
    assert answer.status == 201, session
    foreign_id = session["sessionId"]
    wrong = "x" * len(session["channel"]["token"])

    def ask(session_id):
        started = time.perf_counter_ns()
        connection.request("GET", f"/v1/sessions/{session_id}/poll?token={wrong}&timeout=0")
        response = connection.getresponse()
        body = response.read()
        elapsed = time.perf_counter_ns() - started
        code = None
        try:
            code = json.loads(body).get("code")
        except ValueError:
            pass
        return elapsed, f"{response.status} {code}"

    def unknown_id():
        return "ses_" + "".join(secrets.choice(ALPHABET) for _ in range(len(foreign_id) - 4))

    foreign_times, unknown_times, statuses = [], [], collections.Counter()
    foreign_first = 0
    for index in range(WARM_UP + pairs):
        other = unknown_id()
        if index % 2 == 0:
            foreign, foreign_status = ask(foreign_id)
            unknown, unknown_status = ask(other)
        else:
            unknown, unknown_status = ask(other)
            foreign, foreign_status = ask(foreign_id)
        if index < WARM_UP:
            continue
        foreign_times.append(foreign)
        unknown_times.append(unknown)
        statuses[f"foreign: {foreign_status}"] += 1
        statuses[f"unknown: {unknown_status}"] += 1
        foreign_first += foreign < unknown
    connection.close()

    print(f"pairs: {pairs} over one keep-alive connection, order alternating, after {WARM_UP} to warm up")
    for seen, count in sorted(statuses.items()):
        print(f"  {seen}: {count}")
    print(f"median foreign (existing id, wrong token): {statistics.median(foreign_times) / 1000:.1f} µs")
    print(f"median unknown (no such id):               {statistics.median(unknown_times) / 1000:.1f} µs")
    print(f"foreign faster in {100 * foreign_first / pairs:.1f}% of pairs (target 40-60%)")


if __name__ == "__main__":
    main()
