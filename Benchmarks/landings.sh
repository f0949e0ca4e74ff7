#!/usr/bin/env bash
# Repeat landings per second under wrk, for two builds side by side: each binary serves a fresh relay
# in turn (ROUNDS times, alternated), a session is created and tapped, and wrk sends the phone's reload
# of the ended session's landing (the request a phone repeats most) for SECONDS.
#
#   Benchmarks/landings.sh BIN_A ROOT_A BIN_B ROOT_B [ROUNDS, default 2] [SECONDS, default 8]
#
# ROOT is the checkout whose templates/ the binary serves. Needs wrk. Extra `serve` flags: RELAY_FLAGS.
set -euo pipefail
port=${LINKRELAY_BENCH_PORT:-18750}
key=bench-api-key-0123456789abcdef
ulimit -n 20000 2>/dev/null || true

one() {
    local bin=$1 root=$2 seconds=$3 dir pid landing
    dir=$(mktemp -d)
    (cd "$root" && exec "$bin" serve --port "$port" --store "sqlite:$dir/relay.sqlite" --limits off \
        --api-key "$key" --hold 600 ${RELAY_FLAGS:-} >"$dir/relay.log" 2>&1) &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.01; done
    landing=$(bash "$(dirname "$0")/repeat-landing.sh" "$port" "$key")
    wrk -t2 -c64 -d"${seconds}s" "$landing" | awk '/Requests\/sec/ {print $2}'
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

rounds=${5:-2}
seconds=${6:-8}
for round in $(seq "$rounds"); do
    echo "round $round: A $(one "$1" "$2" "$seconds") requests/s, B $(one "$3" "$4" "$seconds") requests/s"
done
