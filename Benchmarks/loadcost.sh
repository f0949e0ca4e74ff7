#!/usr/bin/env bash
# The relay's CPU per tap under the benchmark's load: a fresh relay as run.sh starts it, N waiters on
# one transport tapped at RATE a second (Benchmarks/waiters.py, taps from 127.0.0.2), and the relay's
# CPU time (user + system, /proc/PID/stat) over 6 s of the taps, counted by /metrics. Unlike
# tapcost.py (no channel open) this includes what the open channels cost: their events, keep-alives
# and endings. Prints waiters.py's figures, that CPU and what the relay read from and wrote to the disk
# in those 6 s (/proc/PID/io: a read means the kernel had dropped a page of the store's files) on one line.
#
#   Benchmarks/loadcost.sh [transport, default sse] [BIN] [--perf | --offcpu]
#
# --perf records those 6 s with `perf record --call-graph dwarf` (1,000 Hz) into loadcost.perf.data
# (perf's own work then adds to the CPU shown). --offcpu records the scheduler's switches instead
# (offcpu.perf.data) and prints where the relay's threads waited in the kernel (Benchmarks/offcpu.py).
# BIN defaults to the release build. N and RATE come from LOADCOST_N (15000) and LOADCOST_RATE (1000);
# LOADCOST_STORE replaces the store (memory, or sqlite:PATH, e.g. on tmpfs); RELAY_FLAGS adds `serve` flags
# (RELAY_FLAGS="--malloc-tuning on"). Needs pip install aiohttp uvloop.
set -euo pipefail
TRANSPORT=${1:-sse}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${2:-$(cd "$root" && swift build -c release --show-bin-path)/linkrelay}
perf=${3:-}
N=${LOADCOST_N:-15000}
RATE=${LOADCOST_RATE:-1000}
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18700}
dir=$(mktemp -d)
ulimit -n 20000 2>/dev/null || true

(cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve --port "$port" \
    --store "${LOADCOST_STORE:-sqlite:$dir/relay.sqlite}" --limits off --api-key "$key" --hold 600 ${RELAY_FLAGS:-} \
    >"$dir/relay.log" 2>&1) &
relay=$!
trap 'kill $relay 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$dir"' EXIT
until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.01; done

python3 "$root/Benchmarks/waiters.py" --target relay --transport "$TRANSPORT" --n "$N" --rate "$RATE" --open-rate 3000 \
    --base "http://127.0.0.1:$port" --api-key "$key" --pids "$relay" --tap-from 127.0.0.2 >"$dir/waiters.out" 2>/dev/null &
waiters=$!

taps() { curl -s "http://127.0.0.1:$port/metrics" | awk '/^linkrelay_landings_total.*accepted/ {print $2}'; }
cpu() { awk '{print $14 + $15}' "/proc/$relay/stat"; }
disk() { awk -v f="$1" '$1 == f ":" {print $2}' "/proc/$relay/io"; }
until [ "$(taps)" -ge 500 ] 2>/dev/null; do sleep 0.05; done  # past the first taps' start
taps0=$(taps)
cpu0=$(cpu)
read0=$(disk read_bytes)
write0=$(disk write_bytes)
if [ "$perf" = --perf ]; then
    perf record -F 1000 --call-graph dwarf,16384 -p "$relay" -o loadcost.perf.data -- sleep 6 >/dev/null 2>&1
elif [ "$perf" = --offcpu ]; then
    perf record -e sched:sched_switch -g -a -o offcpu.perf.data -- sleep 6 >/dev/null 2>&1
else
    sleep 6
fi
cpu1=$(cpu)
taps1=$(taps)
read1=$(disk read_bytes)
write1=$(disk write_bytes)
wait "$waiters" || true

python3 - "$dir/waiters.out" "$((taps1 - taps0))" "$((cpu1 - cpu0))" "$(getconf CLK_TCK)" \
    "$((read1 - read0))" "$((write1 - write0))" <<'EOF'
import json, sys
lines = [l for l in open(sys.argv[1]) if l.startswith("{")]
r = json.loads(lines[-1]) if lines else {}
taps, ticks, hz, read, written = (int(a) for a in sys.argv[2:7])
cpu = ticks / hz
print(json.dumps({
    "transport": r.get("transport"), "n": r.get("n"), "failed": r.get("failed"),
    "kib_per_waiter": r.get("kib_per_waiter"), "tapped_ms": r.get("tapped_ms"), "result_ms": r.get("result_ms"),
    "taps_measured": taps, "relay_cpu_ms_per_tap": round(cpu * 1000 / max(1, taps), 3),
    "relay_cores": round(cpu / 6, 2),
    "disk_read_kib": read // 1024, "disk_written_kib": written // 1024,
}))
EOF
[ "$perf" = --offcpu ] && python3 "$root/Benchmarks/offcpu.py" offcpu.perf.data --pid "$relay"
