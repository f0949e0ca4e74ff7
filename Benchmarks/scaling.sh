#!/usr/bin/env bash
# How the cost grows with the waiters held: memory per waiter and tap→`tapped` p50 / p99 at several
# sizes, on each transport, the relay beside nginx+nchan in the same sitting, and a chart of it.
#
#   Benchmarks/scaling.sh [--bin BIN] [--sizes "1000 5000 10000 18000"] [--rate 1000] [--rounds 1] [--png FILE]
#                         [--anchors "shipped contract"]
#
# For each round, transport (long-poll, WebSocket, SSE) and size, a fresh nginx+nchan and then a fresh relay
# (SQLite, the embedded sandbox, `--limits off`, as run.sh starts it) each get `waiters.py`: N waiters opened
# at 3,000 a second from 127.0.1.X, each tapped once at RATE taps a second from 127.0.2.X (X: the run's
# number). nchan runs on ../shared/bench's configuration with 19,990 worker connections instead of 19,000:
# with 18,000 waiters and the taps' connections nginx ran out, closed connections it took for idle and left
# the harness waiting. `--anchors "shipped contract"` adds a second nchan, `nchan-contract`, held to the
# waiting work API.md asks of the relay and the shipped configuration leaves out: a ping every 15 s on SSE,
# every 20 s on WebSocket, long-polls answered after 25 s. A run that has not ended in 10 minutes is stopped
# and counted as all failed. One JSON line per run goes to scaling.jsonl in the directory printed;
# scaling-chart.py then draws the chart (default Benchmarks/scaling.png) from the median of the rounds. A
# round takes about 11 minutes.
# RELAY_FLAGS adds `serve` flags. Needs: apt-get install nginx libnginx-mod-nchan; pip install aiohttp uvloop
# matplotlib.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${LINKRELAY_BENCH:-$root/../shared/bench}
bin="" sizes="1000 5000 10000 18000" rate=1000 rounds=1 png="$root/Benchmarks/scaling.png" anchors=shipped
while [ $# -gt 0 ]; do
    case $1 in
    --bin) bin=$2 ;;
    --sizes) sizes=$2 ;;
    --rate) rate=$2 ;;
    --rounds) rounds=$2 ;;
    --png) png=$2 ;;
    --anchors) anchors=$2 ;;
    *) echo "unknown argument: $1" >&2; exit 2 ;;
    esac
    shift 2
done
if [ -z "$bin" ]; then
    (cd "$root" && swift build -c release --product linkrelay >&2)
    bin=$(cd "$root" && swift build -c release --show-bin-path)/linkrelay
fi
out=$(mktemp -d /tmp/linkrelay-scaling.XXXX)
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18700}
ulimit -n 20000 2>/dev/null || true
echo "results in $out" >&2

pid="" runs=0
stop() {
    if [ -n "$pid" ]; then
        kill -TERM "$pid" 2>/dev/null || true
        wait "$pid" 2>/dev/null || true
        pid=""
    fi
}
trap stop EXIT

# Runs waiters.py against TARGET ($1: relay or nchan, more arguments after it) with $transport and $n, and
# appends its JSON line, with round, load average and $label as its target, to scaling.jsonl. A run in which
# waiters failed still counts (its line says how many); one that timed out counts as every waiter failed.
measure() {
    local target=$1 line
    shift
    # Each run opens its connections from loopback addresses of its own: those of the run before stay in
    # TIME_WAIT for 60 s, and with 18,000 of them beside the 18,000 a run opens, each connect() searched long
    # for a free port, holding up the harness's one thread and every clock in it (the relay's 18,000
    # long-polls right after nchan's had a `tapped` p99 of 196-248 ms).
    runs=$((runs + 1))
    line=$(timeout 600 python3 "$root/Benchmarks/waiters.py" --target "$target" --transport "$transport" --n "$n" \
        --rate "$rate" --open-rate 3000 --pids "$pid" --wait-from "127.0.1.$((runs % 250 + 1))" \
        --tap-from "127.0.2.$((runs % 250 + 1))" "$@" 2>>"$out/waiters.err" | tail -1) || true
    python3 -c 'import json, sys
target, transport, n, line, round, load, label = sys.argv[1:]
r = json.loads(line) if line else {"target": target, "transport": transport, "n": int(n), "failed": int(n), "timed_out": True}
r.update(target=label, round=int(round), load=float(load))
print(json.dumps(r))' "$target" "$transport" "$n" "$line" "$round" "$(cut -d" " -f1 /proc/loadavg)" "$label" \
        | tee -a "$out/scaling.jsonl" >&2
}

for round in $(seq "$rounds"); do
    for transport in longpoll ws sse; do
        for n in $sizes; do
            for anchor in $anchors; do
                mkdir -p "$out/nchan"
                contract=()
                label=nchan
                if [ "$anchor" = contract ]; then
                    label=nchan-contract
                    case $transport in
                    longpoll) contract=(-e "s#nchan_subscriber_timeout 180s#nchan_subscriber_timeout 25s#") ;;
                    ws) contract=(-e "s#nchan_subscriber longpoll#nchan_websocket_ping_interval 20; &#") ;;
                    sse) contract=(-e "s#nchan_subscriber longpoll#nchan_eventsource_ping_interval 15; &#") ;;
                    esac
                fi
                sed -e "s#/tmp/nchan-bench#$out/nchan#g" -e "s#worker_connections 19000#worker_connections 19990#" \
                    "${contract[@]}" "$bench/anchors/nchan.conf" >"$out/nchan.conf"
                nginx -c "$out/nchan.conf" -p "$out/nchan" >"$out/nchan/out.log" 2>&1 &
                pid=$!
                until curl -s -o /dev/null "http://127.0.0.1:8201/static"; do sleep 0.05; done
                measure nchan
                stop
            done

            rm -f "$out/relay.sqlite"*
            (cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve \
                --port "$port" --store "sqlite:$out/relay.sqlite" --limits off --api-key "$key" --hold 600 \
                ${RELAY_FLAGS:-} >"$out/relay.log" 2>&1) &
            pid=$!
            until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.05; done
            sleep 1
            label=relay
            measure relay --base "http://127.0.0.1:$port" --api-key "$key"
            stop
        done
    done
done
python3 "$root/Benchmarks/scaling-chart.py" "$out/scaling.jsonl" "$png"
echo "chart: $png" >&2
