#!/usr/bin/env bash
# Webhooks under the benchmark's load (issue 37): relays that send signed webhooks to a receiver on
# loopback (Benchmarks/webhook-receiver.py), each fresh, on SQLite and the embedded sandbox with
# --limits off, as run.sh starts them. Three parts:
#
#   side  N waiters tapped at RATE a second (waiters.py) on a relay without webhooks, then on one with,
#         ROUNDS times in turn: tap→tapped and tap→result p50 / p99 side by side; delivered/s and
#         event→delivery p50 / p99; whether every session's session.tapped and session.verified arrived.
#   down  whole sessions at RATE a second (create, the phone's visit to Prove, the landing; no channel)
#         for DOWN seconds while the receiver refuses every connection, and AFTER seconds more once it
#         is back; then the wait until the receiver has every session's two messages: the drain's
#         length and rate, the relay's CPU per message, and what was lost (must be nothing). Should the
#         wait end first, the relay's SQLite file says what is still in its outbox, by state.
#   fill  FILL pending messages (sessions at RATE a second, receiver down), then N waiters tapped at
#         RATE a second on that relay; the same on a fresh relay with an empty outbox (receiver down
#         for both); then the receiver comes back and a third run of taps goes while the backlog drains.
#   tenants  two tenants, each with its own receiver, whole sessions at RATE a second in all (half
#         each) for DOWN seconds, three times on fresh relays: both receivers up; the second tenant's
#         refusing every connection; the second tenant's answering only after 20 s (every attempt
#         times out). The first tenant's event→delivery p50 / p99 in each, and whether every one of
#         its sessions got both messages: a receiver that is down or slow must not move them.
#
#   Benchmarks/webhooks.sh [--n 15000] [--rate 1000] [--transport ws] [--rounds 1] [--down 60] [--after 0]
#                          [--fill 100000] [--drain-timeout 1800] [--parts side,down,fill,tenants] [--bin BIN]
#
# The issue's outage is 10 minutes: --down 600 (about 1.2 million messages at 1,000 taps a second).
# Raw results stay in the printed directory. The relays' SQLite files go there too, or to STORE_DIR
# (a tmpfs such as /dev/shm tells the disk's share apart). RELAY_FLAGS adds `serve` flags.
# RECEIVER_NICE (e.g. 19) runs the receiver at a lower priority: its share of the two cores apart.
# Needs pip install aiohttp uvloop standardwebhooks.
set -euo pipefail
N=15000
RATE=1000
TRANSPORT=ws
ROUNDS=1
DOWN=60
AFTER=0
FILL=100000
DRAIN_TIMEOUT=1800
PARTS=side,down,fill
root=$(cd "$(dirname "$0")/.." && pwd)
bin=""
while [ $# -gt 0 ]; do
    case $1 in
        --n) N=$2 ;;
        --rate) RATE=$2 ;;
        --transport) TRANSPORT=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --down) DOWN=$2 ;;
        --after) AFTER=$2 ;;
        --fill) FILL=$2 ;;
        --drain-timeout) DRAIN_TIMEOUT=$2 ;;
        --parts) PARTS=$2 ;;
        --bin) bin=$2 ;;
        *) sed -n '2,25p' "$0" >&2; exit 2 ;;
    esac
    shift 2
done
if [ -z "$bin" ]; then
    echo "== build (release)" >&2
    (cd "$root" && swift build -c release --product linkrelay >&2)
    bin=$(cd "$root" && swift build -c release --show-bin-path)/linkrelay
fi
out=$(mktemp -d /tmp/linkrelay-webhooks.XXXX)
store=${STORE_DIR:-$out}
mkdir -p "$store"
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18700}
hooks=$((port + 90))    # the receiver
control=$((port + 91))  # its control routes
hooks2=$((port + 92))   # the second tenant's receiver (part tenants)
control2=$((port + 93))
secret="whsec_$(head -c 32 /dev/urandom | base64)"
webhook_flags=(--webhook-url "http://127.0.0.1:$hooks/hooks" --webhook-secret "$secret")
ulimit -n 20000 2>/dev/null || true
echo "results in $out" >&2
(cd "$root" && git rev-parse --short HEAD 2>/dev/null) >"$out/commit" || true

relay_pid=""
receiver_pid=""
stop_relay() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
        relay_pid=""
    fi
}
cleanup() {
    stop_relay
    if [ -n "$receiver_pid" ]; then kill -TERM "$receiver_pid" 2>/dev/null || true; wait "$receiver_pid" 2>/dev/null || true; fi
}
trap cleanup EXIT

# A fresh relay (new SQLite file) named $1; further arguments go to `serve`.
start_relay() {
    local name=$1
    shift
    if curl -s "http://127.0.0.1:$port/readyz" >/dev/null; then
        echo "port $port is taken (LINKRELAY_BENCH_PORT chooses another)" >&2
        exit 1
    fi
    rm -f "$store/$name.sqlite"*
    (cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve \
        --port "$port" --store "sqlite:$store/$name.sqlite" --limits off --api-key "$key" --hold 600 "$@" \
        ${RELAY_FLAGS:-} >"$out/$name.log" 2>&1) &
    relay_pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
        kill -0 "$relay_pid" 2>/dev/null || { echo "the relay did not start: $out/$name.log" >&2; exit 1; }
        sleep 0.02
    done
}

# The machine's load, before each part: other work on the cores shows in every figure.
note_load() { echo "$1: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/load.txt"; }
receiver() { curl -sf -X "$1" "http://127.0.0.1:$control/$2" "${@:3}"; }
receiver2() { curl -sf -X "$1" "http://127.0.0.1:$control2/$2" "${@:3}"; }
# A relay that is gone (stopped from outside) reads as 0, so that the run still reports what it has.
cpu_s() { awk '{printf "%.2f\n", ($14 + $15) / 100}' "/proc/$1/stat" 2>/dev/null || echo 0; }
metric() {  # null when the relay does not answer
    local value
    value=$(curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m {print $2}') || true
    echo "${value:-null}"
}

# Waits until the receiver's window has $1 first deliveries or $2 seconds have passed, sampling the
# relay's queue depth every 5 s into $3. Prints the seconds waited.
await_delivered() {
    local want=$1 timeout=$2 timeline=$3 t0 now
    t0=$(date +%s)
    while true; do
        now=$(date +%s)
        local got
        got=$(receiver GET stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["window"]["delivered"])')
        echo "$((now - t0)) $got $(metric linkrelay_webhook_queue_depth)" >>"$timeline"
        if [ "$got" -ge "$want" ] || [ $((now - t0)) -ge "$timeout" ]; then
            echo $((now - t0))
            return
        fi
        sleep 5
    done
}

# Which sessions in file $1 lack a session.tapped or session.verified message.
check() {
    receiver POST check -H 'Content-Type: application/json' \
        -d "{\"sessions_file\": \"$1\", \"types\": [\"session.tapped\", \"session.verified\"]}"
}

# waiters.py on the running relay; its JSON line to $1.json, each tapped session's id to $1.ids.
waiters() {
    python3 "$root/Benchmarks/waiters.py" --target relay --transport "$TRANSPORT" --n "$N" --rate "$RATE" \
        --open-rate 3000 --end-settle 2 --base "http://127.0.0.1:$port" --api-key "$key" --pids "$relay_pid" \
        --tap-from 127.0.0.2 --trace "$out/$1.trace" 2>>"$out/waiters.err" | tail -1 >"$out/$1.json" || true
    awk '!/^#/ && $3 != "-" {print $4}' "$out/$1.trace" >"$out/$1.ids"
}

# Whole sessions at a steady rate with no channel open: the load of the outage and of the fill.
cat >"$out/sessions.py" <<'EOF'
"""Whole sessions at a steady rate, no channel open: create, the phone's visit to Prove, the landing.

Writes the id of each session whose landing was taken to --sessions-file, and prints one JSON line.
"""
import argparse, asyncio, json, sys, time, uuid

import aiohttp

try:
    import uvloop
except ImportError:
    uvloop = None

# The sandbox's possession test users: batches take turns, so that its outbox (asked for by phone
# number) answers with a few thousand links rather than all the 20,000 it keeps.
PHONES = ["2001004014", "2001004015", "+2001004025", "+2001004026", "2001004016", "2001004017",
          "2001004041", "+2001004027", "+2001004028", "+2001004043"]


def pct(values, p):
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))], 3) if values else None


async def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--base", required=True)
    p.add_argument("--api-key", required=True, action="append",
                   help="several: batches take turns, each key's session ids to --sessions-file.N")
    p.add_argument("--rate", type=float, default=1000)
    p.add_argument("--seconds", type=float, default=60)
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--sessions-file", required=True)
    p.add_argument("--tap-from", default="127.0.0.2")
    p.add_argument("--in-flight", type=int, default=64, help="requests in flight at most")
    a = p.parse_args()
    headers = [{"Authorization": f"Bearer {key}"} for key in a.api_key]
    sem = asyncio.Semaphore(a.in_flight)
    locks = {phone: asyncio.Lock() for phone in PHONES}
    counts = {"created": 0, "tapped": 0, "create_failed": 0, "tap_failed": 0, "unmatched": 0}
    errors, landing_ms, per_second = {}, [], {}
    ids = [open(a.sessions_file if len(a.api_key) == 1 else f"{a.sessions_file}.{i}", "w")
           for i in range(len(a.api_key))]

    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0)) as http, \
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=0, local_addr=(a.tap_from, 0))) as taps:

        async def create(phone, key):
            async with sem:
                body = {"phoneNumber": phone, "clientRequestId": f"steady-{uuid.uuid4().hex[:12]}"}
                async with http.post(f"{a.base}/v1/sessions", json=body, headers=headers[key]) as r:
                    if r.status != 201:
                        counts["create_failed"] += 1
                        return None
                    counts["created"] += 1
                    return await r.json()

        async def land(m, by_target, key):
            async with sem:
                async with http.get(m["link"], allow_redirects=False) as r:
                    location = r.headers.get("Location", "")
            s = by_target.get(location.split("?")[0])
            if s is None:
                counts["unmatched"] += 1
                return
            async with sem:
                t = time.monotonic()
                async with taps.get(location, allow_redirects=False) as r:
                    await r.read()
                    status = r.status
                now = time.monotonic()
            if status != 200:
                counts["tap_failed"] += 1
                return
            landing_ms.append((now - t) * 1000)
            counts["tapped"] += 1
            per_second[int(now - t0)] = per_second.get(int(now - t0), 0) + 1
            ids[key].write(s["sessionId"] + "\n")

        async def batch(k, n):
            phone = PHONES[k % len(PHONES)]
            key = k % len(headers)
            try:
                # One batch per number at a time: the newest n links of that number are then this batch's.
                async with locks[phone]:
                    sessions = [s for s in await asyncio.gather(*(create(phone, key) for _ in range(n))) if s]
                    async with http.get(f"{a.base}/sandbox/outbox", params={"phoneNumber": phone}) as r:
                        messages = (await r.json())["messages"][-len(sessions):] if sessions else []
                by_target = {s["finalTargetUrl"]: s for s in sessions}
                await asyncio.gather(*(land(m, by_target, key) for m in messages))
            except (aiohttp.ClientError, OSError, ValueError, KeyError) as e:
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1

        total = int(a.rate * a.seconds)
        pending, behind = set(), 0.0
        t0 = time.monotonic()
        for k, start in enumerate(range(0, total, a.batch)):
            lag = t0 + start / a.rate - time.monotonic()
            if lag > 0:
                await asyncio.sleep(lag)
            else:
                behind = max(behind, -lag)
            task = asyncio.create_task(batch(k, min(a.batch, total - start)))
            pending.add(task)
            task.add_done_callback(pending.discard)
            # A relay (or this process) that falls behind gets no more than 50 batches at once.
            while len(pending) > 50:
                await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        await asyncio.gather(*pending)
        took = time.monotonic() - t0
    for file in ids:
        file.close()
    whole = [v for s, v in per_second.items() if 0 < s < int(took) - 1]
    print(json.dumps({
        **counts, "errors": errors, "asked": total, "seconds": round(took, 1),
        "taps_per_s": round(counts["tapped"] / took, 1), "taps_per_s_min": min(whole) if whole else None,
        "behind_s": round(behind, 2),
        "landing_ms": {"p50": pct(landing_ms, 50), "p99": pct(landing_ms, 99), "max": pct(landing_ms, 100)},
    }))


if __name__ == "__main__":
    if uvloop:
        uvloop.install()
    asyncio.run(main())
EOF
sessions() {  # name seconds
    python3 "$out/sessions.py" --base "http://127.0.0.1:$port" --api-key "$key" --rate "$RATE" --seconds "$2" \
        --sessions-file "$out/$1.ids" 2>>"$out/sessions.err" | tail -1 >"$out/$1.json" || true
}

nice -n "${RECEIVER_NICE:-0}" python3 "$root/Benchmarks/webhook-receiver.py" --port "$hooks" --control-port "$control" --secret "$secret" \
    >"$out/receiver.json" 2>"$out/receiver.err" &
receiver_pid=$!
until receiver GET stats >/dev/null 2>&1; do
    kill -0 "$receiver_pid" 2>/dev/null || { echo "the webhook receiver did not start: $out/receiver.err" >&2; exit 1; }
    sleep 0.05
done

# Records the receiver's window, the completeness check of ids file $2 and the relay's webhook
# counters as $1.webhooks.json.
record() {
    local name=$1 ids=$2
    {
        echo "{\"window\": $(receiver GET stats | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["window"]))'),"
        echo " \"check\": $(check "$ids"),"
        echo " \"relay\": {\"delivered\": $(metric 'linkrelay_webhook_deliveries_total{outcome="delivered"}'),"
        echo "  \"retry\": $(metric 'linkrelay_webhook_deliveries_total{outcome="retry"}'),"
        echo "  \"failed\": $(metric 'linkrelay_webhook_deliveries_total{outcome="failed"}')}}"
    } >"$out/$name.webhooks.json"
}

if [[ $PARTS == *side* ]]; then
    note_load side
    echo "== side by side: $N waiters on $TRANSPORT, $RATE taps/s, without and with webhooks, $ROUNDS rounds" >&2
    # In turn, so that the machine's drift falls on both.
    for round in $(seq "$ROUNDS"); do
        start_relay "plain-$round"
        waiters "plain-$round"
        stop_relay
        start_relay "hooked-$round" "${webhook_flags[@]}"
        receiver POST mark >/dev/null
        waiters "hooked-$round"
        await_delivered $((2 * $(wc -l <"$out/hooked-$round.ids"))) 120 "$out/hooked-$round.timeline" >/dev/null
        record "hooked-$round" "$out/hooked-$round.ids"
        stop_relay
    done
fi

if [[ $PARTS == *down* ]]; then
    note_load down
    echo "== down receiver: $RATE sessions/s for $DOWN s, refused; then $AFTER s more with it back" >&2
    start_relay down "${webhook_flags[@]}"
    receiver POST 'down?mode=refuse' >/dev/null
    sessions down-outage "$DOWN"
    sleep 6  # the gauge is read every 5 s
    pending_at_end=$(metric linkrelay_webhook_queue_depth)
    rss_kib=$(awk '/VmRSS/ {print $2}' "/proc/$relay_pid/status" 2>/dev/null || echo 0)
    receiver POST mark >/dev/null
    cpu0=$(cpu_s "$relay_pid")
    t_up=$(date +%s.%N)
    receiver POST up >/dev/null
    if [ "$AFTER" -gt 0 ]; then sessions down-after "$AFTER"; else : >"$out/down-after.ids"; echo '{}' >"$out/down-after.json"; fi
    cat "$out/down-outage.ids" "$out/down-after.ids" >"$out/down.ids"
    waited=$(await_delivered $((2 * $(wc -l <"$out/down.ids"))) "$DRAIN_TIMEOUT" "$out/down.timeline")
    cpu1=$(cpu_s "$relay_pid")
    record down "$out/down.ids"
    stop_relay
    # What the relay's outbox holds, by state, and the sessions of which it holds no message of a type:
    # a message still pending when the wait ended is late, not lost.
    python3 - "$store/down.sqlite" "$out/down.ids" >"$out/down.outbox.json" <<'EOF'
import json, sqlite3, sys
db = sqlite3.connect(f"file:{sys.argv[1]}?mode=ro", uri=True)
states = dict(db.execute("SELECT state, count(*) FROM webhook_messages GROUP BY state").fetchall())
held = {}
for session, type_ in db.execute("SELECT session_id, type FROM webhook_messages"):
    held[session] = held.get(session, 0) | {"session.tapped": 1, "session.verified": 2}.get(type_, 0)
ids = [line.strip() for line in open(sys.argv[2]) if line.strip()]
print(json.dumps({"states": states, "sessions": len(ids), "lacking": sum(1 for i in ids if held.get(i, 0) != 3)}))
EOF
    python3 - "$out/down.extra.json" "$pending_at_end" "$rss_kib" "$cpu0" "$cpu1" "$t_up" "$waited" <<'EOF'
import json, sys
path, pending, rss, cpu0, cpu1, t_up, waited = sys.argv[1:]
json.dump({"pending_at_end": float(pending) if pending not in ("", "null") else None, "rss_mib_at_end": round(int(rss) / 1024, 1),
           "drain_cpu_s": round(float(cpu1) - float(cpu0), 2), "up_at": float(t_up), "waited_s": int(waited)},
          open(path, "w"))
EOF
fi

if [[ $PARTS == *fill* ]]; then
    note_load fill
    echo "== a full outbox: $N waiters on $TRANSPORT at $RATE taps/s, with an empty outbox, with $FILL pending, and draining" >&2
    receiver POST 'down?mode=refuse' >/dev/null
    start_relay empty "${webhook_flags[@]}"
    waiters empty
    stop_relay
    start_relay full "${webhook_flags[@]}"
    sessions fill $((FILL / 2 / RATE))
    sleep 6  # the gauge is read every 5 s
    metric linkrelay_webhook_queue_depth >"$out/fill.pending"
    waiters full
    receiver POST mark >/dev/null
    receiver POST up >/dev/null
    waiters draining
    cat "$out/fill.ids" "$out/full.ids" "$out/draining.ids" >"$out/all-fill.ids"
    await_delivered $((2 * $(wc -l <"$out/all-fill.ids"))) "$DRAIN_TIMEOUT" "$out/fill.timeline" >/dev/null
    record fill "$out/all-fill.ids"
    stop_relay
fi

if [[ $PARTS == *tenants* ]]; then
    note_load tenants
    echo "== two tenants, two receivers: $RATE sessions/s for $DOWN s; the second's receiver up, refusing, slow" >&2
    key2=bench-api-key-of-bank-b-0123456789
    secret2="whsec_$(head -c 32 /dev/urandom | base64)"
    nice -n "${RECEIVER_NICE:-0}" python3 "$root/Benchmarks/webhook-receiver.py" --port "$hooks2" \
        --control-port "$control2" --secret "$secret2" >"$out/receiver2.json" 2>"$out/receiver2.err" &
    receiver2_pid=$!
    until receiver2 GET stats >/dev/null 2>&1; do sleep 0.05; done
    echo "{\"tenants\":[{\"name\":\"bank-b\",\"apiKeys\":[\"$key2\"],\"webhook\":{\"url\":\"http://127.0.0.1:$hooks2/hooks\",\"secret\":\"$secret2\"}}]}" \
        >"$out/tenants.json"
    for mode in up refuse slow; do
        receiver2 POST up >/dev/null
        if [ "$mode" != up ]; then receiver2 POST "down?mode=$mode" >/dev/null; fi
        start_relay "tenants-$mode" "${webhook_flags[@]}" --tenants "$out/tenants.json"
        receiver POST mark >/dev/null
        receiver2 POST mark >/dev/null
        python3 "$out/sessions.py" --base "http://127.0.0.1:$port" --api-key "$key" --api-key "$key2" --rate "$RATE" \
            --seconds "$DOWN" --sessions-file "$out/tenants-$mode.ids" 2>>"$out/sessions.err" | tail -1 \
            >"$out/tenants-$mode.json" || true
        await_delivered $((2 * $(wc -l <"$out/tenants-$mode.ids.0"))) 120 "$out/tenants-$mode.timeline" >/dev/null
        record "tenants-$mode" "$out/tenants-$mode.ids.0"
        echo "{\"window\": $(receiver2 GET stats | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["window"]))')}" \
            >"$out/tenants-$mode.second.json"
        stop_relay
    done
    receiver2 POST up >/dev/null
    kill -TERM "$receiver2_pid" 2>/dev/null || true
    wait "$receiver2_pid" 2>/dev/null || true
fi

receiver GET stats | python3 /dev/fd/3 "$out" "$N" "$RATE" "$TRANSPORT" "$DOWN" "$AFTER" 3<<'EOF'
import json, os, sys
out, n, rate, transport, down, after = sys.argv[1:]
def load(name):
    try:
        return json.load(open(f"{out}/{name}"))
    except (OSError, ValueError):
        return {}
def get(d, *path):
    for p in path:
        d = d.get(p) if isinstance(d, dict) else None
    return d
def fmt(v):
    if isinstance(v, float) and v.is_integer() and abs(v) >= 100:
        v = int(v)
    return "-" if v is None else (f"{v:,.2f}" if isinstance(v, float) else f"{v:,}")
def lat(w, ev):
    return f"{fmt(get(w, ev, 'p50'))} / {fmt(get(w, ev, 'p99'))}"
def complete(h):
    c = h.get("check", {})
    m = c.get("missing") or {}
    return (f"{fmt(c.get('complete'))} of {fmt(c.get('expected'))} (lacking tapped: {fmt(m.get('session.tapped'))}, "
            f"verified: {fmt(m.get('session.verified'))}); {fmt(get(h, 'window', 'duplicates'))} duplicates")
print(f"\nresults in {out}")
rounds = 0
while os.path.exists(f"{out}/plain-{rounds + 1}.json"):
    rounds += 1
if rounds:
    # One cell per column, the rounds in turn, separated by commas.
    def each(name, f):
        return ", ".join(f(load(f"{name}-{r}.json"), load(f"hooked-{r}.webhooks.json")) for r in range(1, rounds + 1))
    print(f"\n| {n} waiters on {transport}, {rate} taps/s{f', {rounds} rounds in turn' if rounds > 1 else ''} "
          f"| LinkRelay | LinkRelay + webhooks |\n|---|---|---|")
    for ev in ("tapped", "result"):
        print(f"| tap→{ev} p50 / p99 ms | {each('plain', lambda a, h: lat(a, ev + '_ms'))} | {each('hooked', lambda a, h: lat(a, ev + '_ms'))} |")
    print(f"| taps sent in s; failed waiters | {each('plain', lambda a, h: fmt(a.get('tap_s')) + '; ' + fmt(a.get('failed')))} "
          f"| {each('hooked', lambda a, h: fmt(a.get('tap_s')) + '; ' + fmt(a.get('failed')))} |")
    print(f"| webhooks: delivered/s (most in one second) | | "
          f"{each('hooked', lambda a, h: fmt(get(h, 'window', 'delivered_per_s')) + ' (' + fmt(get(h, 'window', 'peak_per_s')) + ')')} |")
    print(f"| webhooks: event→delivery p50 / p99 ms | | "
          f"{each('hooked', lambda a, h: fmt(get(h, 'window', 'event_to_delivery_ms', 'p50')) + ' / ' + fmt(get(h, 'window', 'event_to_delivery_ms', 'p99')))} |")
    print(f"| webhooks: sessions with both messages | | {each('hooked', lambda a, h: complete(h))} |")
if os.path.exists(f"{out}/down.webhooks.json"):
    o, x, h = load("down-outage.json"), load("down.extra.json"), load("down.webhooks.json")
    w = h.get("window", {})
    took = (w["last_at"] - x["up_at"]) if w.get("last_at") else None
    msgs = w.get("delivered") or 0
    done = get(h, "check", "complete") == get(h, "check", "expected")
    print(f"\n| receiver down {down} s, {rate} sessions/s{', then ' + after + ' s more' if after != '0' else ''} | LinkRelay + webhooks |\n|---|---|")
    print(f"| sessions tapped in the outage; taps/s (slowest second) | {fmt(o.get('tapped'))}; {fmt(o.get('taps_per_s'))} ({fmt(o.get('taps_per_s_min'))}) |")
    print(f"| landing answered p50 / p99 ms, in the outage | {fmt(get(o, 'landing_ms', 'p50'))} / {fmt(get(o, 'landing_ms', 'p99'))} |")
    print(f"| pending at the outage's end; relay RSS MiB | {fmt(x.get('pending_at_end'))}; {fmt(x.get('rss_mib_at_end'))} |")
    print(f"| drained in s; delivered/s | {fmt(round(took, 1) if took else None)}{'' if done else ' (not drained: waited ' + str(x.get('waited_s')) + ' s)'}; "
          f"{fmt(round(msgs / took, 1) if took else None)} |")
    print(f"| relay CPU per delivered message in the drain, ms | {fmt(round(x['drain_cpu_s'] * 1000 / msgs, 3) if msgs else None)} |")
    print(f"| sessions with both messages | {complete(h)} |")
    print(f"| relay: delivered / retry / failed attempts | {fmt(get(h, 'relay', 'delivered'))} / {fmt(get(h, 'relay', 'retry'))} / {fmt(get(h, 'relay', 'failed'))} |")
    ob = load("down.outbox.json")
    print(f"| the relay's outbox after the wait, by state; sessions of which it holds no message of a type | "
          f"{', '.join(f'{k} {fmt(v)}' for k, v in sorted(ob.get('states', {}).items()))}; {fmt(ob.get('lacking'))} of {fmt(ob.get('sessions'))} |")
if os.path.exists(f"{out}/fill.webhooks.json"):
    e, f, d, h = load("empty.json"), load("full.json"), load("draining.json"), load("fill.webhooks.json")
    pending = open(f"{out}/fill.pending").read().strip()
    pending = fmt(float(pending)) if pending not in ("", "null") else "-"
    print(f"\n| {n} waiters on {transport}, {rate} taps/s, receiver down | empty outbox | {pending} pending | draining (receiver back) |\n|---|---|---|---|")
    print(f"| tap→tapped p50 / p99 ms | {lat(e, 'tapped_ms')} | {lat(f, 'tapped_ms')} | {lat(d, 'tapped_ms')} |")
    print(f"| tap→result p50 / p99 ms | {lat(e, 'result_ms')} | {lat(f, 'result_ms')} | {lat(d, 'result_ms')} |")
    print(f"| taps sent in s; failed waiters | {fmt(e.get('tap_s'))}; {fmt(e.get('failed'))} | {fmt(f.get('tap_s'))}; {fmt(f.get('failed'))} | {fmt(d.get('tap_s'))}; {fmt(d.get('failed'))} |")
    w = h.get("window", {})
    print(f"| the backlog and the taps' messages: delivered/s; sessions with both | | | {fmt(w.get('delivered_per_s'))}; {complete(h)} |")
if os.path.exists(f"{out}/tenants-up.webhooks.json"):
    print(f"\n| two tenants, {rate} sessions/s in all for {down} s | second's receiver up | refusing | slow (20 s) |\n|---|---|---|---|")
    runs = [(load(f"tenants-{m}.json"), load(f"tenants-{m}.webhooks.json"), load(f"tenants-{m}.second.json"))
            for m in ("up", "refuse", "slow")]
    print("| first tenant: event→delivery p50 / p99 ms | " + " | ".join(
        fmt(get(h, "window", "event_to_delivery_ms", "p50")) + " / " + fmt(get(h, "window", "event_to_delivery_ms", "p99"))
        for _, h, _ in runs) + " |")
    print("| first tenant: delivered/s; sessions with both messages | " + " | ".join(
        fmt(get(h, "window", "delivered_per_s")) + "; " + complete(h) for _, h, _ in runs) + " |")
    print("| second tenant: delivered; refused or timed out | " + " | ".join(
        fmt(get(s, "window", "delivered")) + "; " + fmt(get(s, "window", "refused")) for _, _, s in runs) + " |")
    print("| sessions tapped (both tenants); landing p50 / p99 ms | " + " | ".join(
        fmt(o.get("tapped")) + "; " + fmt(get(o, "landing_ms", "p50")) + " / " + fmt(get(o, "landing_ms", "p99"))
        for o, _, _ in runs) + " |")
t = json.loads(sys.stdin.read())["total"]
print(f"\nLoad averages (1, 5, 15 min) before each part: {'; '.join(open(f'{out}/load.txt').read().split(chr(10))).strip('; ')}.")
print(f"\nSignatures checked with the standardwebhooks library: {fmt(t['verified'])} valid, {fmt(t['verify_failed'])} not.")
EOF
