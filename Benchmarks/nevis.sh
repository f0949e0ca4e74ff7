#!/usr/bin/env bash
# The cost of asking Nevis (issue 49), on a fresh relay per round (SQLite, the embedded Prove and Nevis
# sandboxes, --limits off): first Unify taps alone (waiters.py: TAPS waiters tapped at RATE a second),
# then N Nevis sessions left waiting while the same Unify taps run again (Benchmarks/nevis.py), then W
# of the Nevis sessions approved on the sandbox's app page. Prints, per round: status questions/s, the
# relay's CPU, Approve -> result p50/p99, and the Unify tap -> result p50/p99 without and with them.
#
#   Benchmarks/nevis.sh [--n 10000] [--taps 2000] [--rate 200] [--rounds 2] [--transport ws] [--bin BIN]
#
# Raw results stay in the printed directory. Needs pip install aiohttp (uvloop optional).
set -euo pipefail
N=10000
TAPS=2000
RATE=200
ROUNDS=2
TRANSPORT=ws
root=$(cd "$(dirname "$0")/.." && pwd)
bin=""
while [ $# -gt 0 ]; do
    case $1 in
        --n) N=$2 ;;
        --taps) TAPS=$2 ;;
        --rate) RATE=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --transport) TRANSPORT=$2 ;;
        --bin) bin=$2 ;;
        *) sed -n '2,10p' "$0" >&2; exit 2 ;;
    esac
    shift 2
done
if [ -z "$bin" ]; then
    (cd "$root" && swift build -c release --product linkrelay >&2)
    bin="$root/.build/release/linkrelay"
fi
port=${LINKRELAY_BENCH_PORT:-18760}
key=bench-api-key-0123456789abcdef
out=$(mktemp -d)
echo "results: $out" >&2
ulimit -n 65536 2>/dev/null || ulimit -n 20000 2>/dev/null || true
relay_pid=""
stop_relay() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
        relay_pid=""
    fi
}
trap stop_relay EXIT

start_relay() {
    (cd "$root" && exec "$bin" serve --port "$port" --store "sqlite:$out/$1.sqlite" --limits off \
        --api-key "$key" --hold 600 >"$out/$1.log" 2>&1) &
    relay_pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
        kill -0 "$relay_pid" 2>/dev/null || { echo "the relay did not start: $out/$1.log" >&2; exit 1; }
        sleep 0.05
    done
}

taps="python3 $root/Benchmarks/waiters.py --target relay --base http://127.0.0.1:$port --api-key $key \
    --n $TAPS --rate $RATE --transport $TRANSPORT --hold 120 --tap-from 127.0.0.2"
for round in $(seq "$ROUNDS"); do
    start_relay "round$round"
    $taps >"$out/round$round-alone.json"
    python3 "$root/Benchmarks/nevis.py" --base "http://127.0.0.1:$port" --api-key "$key" --pid "$relay_pid" \
        --n "$N" --during "$taps" >"$out/round$round-nevis.json"
    stop_relay
    python3 - "$out/round$round-alone.json" "$out/round$round-nevis.json" "$round" <<'PY'
import json, sys
alone = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
nevis = json.loads(open(sys.argv[2]).read().strip().splitlines()[-1])
def taps(r):
    tapped, result = r.get("tapped_ms") or {}, r.get("result_ms") or {}
    return f"tapped {tapped.get('p50')}/{tapped.get('p99')}, result {result.get('p50')}/{result.get('p99')}"
print(f"round {sys.argv[3]}: {nevis['waiting']} Nevis sessions waiting: {nevis['status_questions_per_s']} status "
      f"questions/s, relay CPU {nevis['relay_cpu_percent']}%, Approve->result p50/p99 "
      f"{nevis['approve_to_result_ms']['p50']}/{nevis['approve_to_result_ms']['p99']} ms "
      f"({nevis['verified']}/{nevis['watched']} verified); Unify taps p50/p99 ms alone: {taps(alone)}, "
      f"with them: {taps(nevis['during'] or {})}")
PY
done
