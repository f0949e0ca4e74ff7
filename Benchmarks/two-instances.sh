#!/usr/bin/env bash
# Two LinkRelay instances on one PostgreSQL: sessions are created and landed on A, every desktop
# waits on B, so each event crosses instances (A's write, NOTIFY, B reads the store). Prints
# waiters.py's JSON line (landing on A -> event on B).
#
#   Benchmarks/two-instances.sh [N waiters, default 5000] [taps/s, default 500] [transport, default ws] [BIN]
#
# Needs Debian's postgresql (a throw-away cluster is started with scripts/postgres-cluster.sh) and
# pip install aiohttp. BIN defaults to the release build.
set -euo pipefail
N=${1:-5000}
RATE=${2:-500}
TRANSPORT=${3:-ws}
root=$(cd "$(dirname "$0")/.." && pwd)
bin=${4:-$(cd "$root" && swift build -c release --show-bin-path)/linkrelay}
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18800}
ulimit -n 20000 2>/dev/null || true

eval "$(bash "$root/scripts/postgres-cluster.sh" start)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    bash "$root/scripts/postgres-cluster.sh" stop "$LINKRELAY_TEST_POSTGRES_DIR"
}
trap cleanup EXIT
log=$LINKRELAY_TEST_POSTGRES_DIR

"$bin" sandbox --host 127.0.0.1 --port "$port" >"$log/sandbox.log" 2>&1 &
pids+=($!)
for instance in 1 2; do
    (cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve \
        --port $((port + instance)) --store "$LINKRELAY_TEST_POSTGRES_URL" --limits off --api-key "$key" --hold 600 \
        --prove "http://127.0.0.1:$port/sandbox/prove" >"$log/relay-$instance.log" 2>&1) &
    pids+=($!)
done
for instance in 1 2; do
    until curl -sf "http://127.0.0.1:$((port + instance))/readyz" >/dev/null; do sleep 0.05; done
done

python3 "$root/Benchmarks/waiters.py" --target relay --transport "$TRANSPORT" --n "$N" --rate "$RATE" \
    --open-rate 2000 --base "http://127.0.0.1:$((port + 1))" --channel-base "http://127.0.0.1:$((port + 2))" \
    --sandbox "http://127.0.0.1:$port" --api-key "$key" --pids "${pids[1]},${pids[2]}" --tap-from 127.0.0.2 \
    2>"$log/waiters.err" | tail -1
