#!/usr/bin/env bash
# What a waiting channel holds on the heap, by the code that allocated it: a fresh relay (SQLite, the embedded
# sandbox, `--limits off`, `--malloc-tuning off` so that heaptrack attaches to the process that serves), 100
# waiters that come and go to warm it, then heaptrack attached and N waiters opened on one transport and held;
# the relay is killed while they wait, so every block still live counts as "leaked". Prints the allocation
# sites that hold the most, in bytes per waiter (sessions and the sandbox's state included: they are made
# after heaptrack attaches), and the sum.
#
#   Benchmarks/heldheap.sh [transport, default longpoll] [N, default 5000] [BIN]
#
# Needs: apt-get install heaptrack; pip install aiohttp uvloop. Writes heldheap.zst in the working directory.
set -euo pipefail
TRANSPORT=${1:-longpoll}
N=${2:-5000}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${3:-$(cd "$root" && swift build -c release --show-bin-path)/linkrelay}
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18700}
dir=$(mktemp -d)
out=$PWD/heldheap
ulimit -n 20000 2>/dev/null || true

(cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve --port "$port" \
    --store "sqlite:$dir/relay.sqlite" --limits off --api-key "$key" --hold 600 --malloc-tuning off \
    >"$dir/relay.log" 2>&1) &
relay=$!
trap 'kill -9 $relay 2>/dev/null || true; kill $waiters 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.05; done
waiters() {
    python3 "$root/Benchmarks/waiters.py" --target relay --transport "$TRANSPORT" --base "http://127.0.0.1:$port" \
        --api-key "$key" --tap-from 127.0.0.2 "$@"
}
waiters --n 100 >/dev/null 2>&1
heaptrack -o "$out" -p "$relay" >"$dir/heaptrack.log" 2>&1 &
until grep -q "injection finished" "$dir/heaptrack.log"; do sleep 0.2; done
# Held for longer than this script runs: the taps never come.
waiters --n "$N" --settle 600 --wait-from 127.0.1.1 >/dev/null 2>&1 &
waiters=$!
open() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^linkrelay_open_channels/ {s += $2} END {print s + 0}'; }
until [ "$(open)" -ge "$N" ]; do sleep 0.5; done
sleep 2
echo "VmRSS with $N $TRANSPORT waiters held (heaptrack attached): $(awk '/VmRSS/ {print $2, $3}' /proc/$relay/status)"
kill -9 "$relay"
until grep -q "Heaptrack finished" "$dir/heaptrack.log"; do sleep 0.2; done

heaptrack_print -f "$out.zst" --print-leaks 1 --print-peaks 0 --print-allocators 0 --print-temporary 0 \
    --merge-backtraces 0 -n 150 2>/dev/null | python3 -c '
import re, subprocess, sys
n = int(sys.argv[1])
sites, site = [], None
for line in sys.stdin:
    if line.startswith("calls to"):
        break
    m = re.match(r"^(\S+) leaked over (\d+) calls from", line)
    if m:
        site = [m.group(1), int(m.group(2)), []]
        sites.append(site)
    elif site and line.strip() and not line.strip().startswith(("in ", "at ")):
        site[2].append(line.strip())
units = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3}
# The allocators themselves and the standard library say nothing of who allocated.
plumbing = ("swift_", "swift::", "malloc", "realloc", "calloc", "posix_memalign", "operator new", "$ss")
total = 0
for size, calls, frames in sites:
    m = re.match(r"([\d.]+)([KMG]?)", size)
    bytes_ = float(m.group(1)) * units[m.group(2)]
    total += bytes_
    if bytes_ / n < 40:
        continue
    who = [f for f in frames if not f.startswith(plumbing)][:3]
    names = subprocess.run(["swift", "demangle", "--simplified", "--compact"], input="\n".join(who),
                           capture_output=True, text=True).stdout.split("\n")
    print(f"{bytes_ / n:7.0f} B {calls / n:5.2f} allocations per waiter  " + " <- ".join(x[:70] for x in names if x))
print(f"{total / n:7.0f} B per waiter in the 150 largest sites")
' "$N"
