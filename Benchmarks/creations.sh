#!/usr/bin/env bash
# Session creations per second against the embedded sandbox, for two builds side by side: each binary
# serves a fresh relay on SQLite in turn (ROUNDS times, alternated), and 5,000 creates go through 64
# connections after 200 to warm up (as run.sh measures them).
#
#   Benchmarks/creations.sh BIN_A ROOT_A BIN_B ROOT_B [ROUNDS, default 3]
#
# ROOT is the checkout whose templates/ the binary serves. Needs python3 with aiohttp.
set -euo pipefail
port=${LINKRELAY_BENCH_PORT:-18760}
key=bench-api-key-0123456789abcdef
ulimit -n 20000 2>/dev/null || true

one() {
    local bin=$1 root=$2 dir pid
    dir=$(mktemp -d)
    (cd "$root" && exec "$bin" serve --port "$port" --store "sqlite:$dir/relay.sqlite" --limits off \
        --api-key "$key" --hold 600 ${RELAY_FLAGS:-} >"$dir/relay.log" 2>&1) &
    pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.01; done
    python3 - "$port" "$key" <<'PY'
import asyncio, sys, time, aiohttp
port, key = sys.argv[1], sys.argv[2]
async def main():
    headers = {"Authorization": f"Bearer {key}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=64)) as http:
        async def one(i):
            async with http.post(f"http://127.0.0.1:{port}/v1/sessions", json={"phoneNumber": "2001004014"},
                                 headers=headers) as r:
                await r.read()
                return r.status
        await asyncio.gather(*(one(i) for i in range(200)))
        t0 = time.monotonic()
        statuses = await asyncio.gather(*(one(i) for i in range(5000)))
        print(round(5000 / (time.monotonic() - t0)), "(failed", sum(1 for s in statuses if s != 201), end=")")
asyncio.run(main())
PY
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    rm -rf "$dir"
}

rounds=${5:-3}
for round in $(seq "$rounds"); do
    echo "round $round: A $(one "$1" "$2")/s, B $(one "$3" "$4")/s"
done
