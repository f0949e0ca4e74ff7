#!/usr/bin/env bash
# LinkRelay beside its anchors (nginx+nchan, Pushpin, nginx serving a page), measured in one run on
# this machine, and printed as one table with the ratios.
#
#   Benchmarks/run.sh [N waiters, default 15000] [taps/s, default 1000] [soak sessions, default 100000]
#
# The last column is the relay again on each transport, sending signed webhooks to a receiver on loopback
# (webhook-receiver.py): tap latencies beside the plain relay's, delivered/s and event→delivery p50 / p99,
# and whether every session that got its result had both its messages (Benchmarks/webhooks.sh goes further).
#
# RELAY_FLAGS adds `serve` flags to every relay it starts, e.g. RELAY_FLAGS="--malloc-tuning on".
#
# Needs: apt-get install nginx libnginx-mod-nchan pushpin wrk postgresql; pip install aiohttp uvloop standardwebhooks.
# The anchors run under ../shared/bench (LINKRELAY_BENCH overrides); LinkRelay under this folder's copy of
# its waiters.py, which taps on schedule instead of one tap after another, and from 127.0.0.2 (see
# its --tap-from). Raw results stay in the printed directory.
set -euo pipefail
N=${1:-15000}
RATE=${2:-1000}
SOAK=${3:-100000}
root=$(cd "$(dirname "$0")/.." && pwd)
bench=${LINKRELAY_BENCH:-$root/../shared/bench}
out=$(mktemp -d /tmp/linkrelay-bench.XXXX)
key=bench-api-key-0123456789abcdef
port=18700
ulimit -n 20000 2>/dev/null || true

echo "== build (release)" >&2
(cd "$root" && swift build -c release --product linkrelay >&2)
bin=$(cd "$root" && swift build -c release --show-bin-path)/linkrelay

relay_pid=""
stop_relay() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
        relay_pid=""
    fi
}
trap stop_relay EXIT

# Starts a fresh relay (new SQLite file); sets relay_pid, and startup_ms from exec to /readyz = 200.
# Extra arguments go to `serve` (`--prove URL` for the separate sandbox: the credentials are its).
start_relay() {
    local name=$1
    shift
    rm -f "$out/$name.sqlite"*
    local t0
    t0=$(date +%s%N)
    (cd "$root" && PROVE_CLIENT_ID=sandbox-client PROVE_CLIENT_SECRET=sandbox-secret exec "$bin" serve \
        --port "$port" --store "sqlite:$out/$name.sqlite" --limits off --api-key "$key" --hold 600 "$@" ${RELAY_FLAGS:-} \
        >"$out/$name.log" 2>&1) &
    relay_pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do sleep 0.005; done
    startup_ms=$((($(date +%s%N) - t0) / 1000000))
}

rss_kib() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

# Prints the JSON object given as $1 (empty: {}) with NAME=VALUE fields added; whole numbers stay numbers.
with_fields() {
    python3 -c 'import json, sys
r = json.loads(sys.argv[1] or "{}")
for field in sys.argv[2:]:
    name, value = field.split("=", 1)
    r[name] = int(value) if value.isdigit() else value
print(json.dumps(r))' "$@"
}

echo "== anchors: nginx+nchan, nginx static, Pushpin ($N waiters, $RATE taps/s)" >&2
bash "$bench/run-anchors.sh" "$N" "$RATE" >"$out/anchors.jsonl" 2>"$out/anchors.err" || true
# Pushpin's processes are still shutting down when that script returns (two of them ran at 12% of a
# core each as the first relay started): wait up to 30 s for them to go, so the relay gets the cores.
for _ in $(seq 60); do pgrep -f linkrelay-anchors >/dev/null || break; sleep 0.5; done
# nchan on SSE too, through this repo's waiters.py (the shared one asks for no event stream), taps as for the relay.
echo "== anchors: nginx+nchan on SSE ($N waiters, $RATE taps/s)" >&2
mkdir -p "$out/nchan-sse"
sed "s#/tmp/nchan-bench#$out/nchan-sse#g" "$bench/anchors/nchan.conf" >"$out/nchan-sse/nchan.conf"
nginx -c "$out/nchan-sse/nchan.conf" -p "$out/nchan-sse" >"$out/nchan-sse/out.log" 2>&1 &
nchan_pid=$!  # the master: the config keeps it in the foreground
sleep 1
python3 "$root/Benchmarks/waiters.py" --target nchan --transport sse --n "$N" --rate "$RATE" --open-rate 3000 \
    --pids "$nchan_pid" --tap-from 127.0.0.2 2>>"$out/waiters.err" | tail -1 >>"$out/anchors.jsonl" || true
kill "$nchan_pid" 2>/dev/null || true
sleep 1

echo "== LinkRelay: start-up, idle memory, waiters on each transport" >&2
: >"$out/relay.jsonl"
for transport in longpoll ws sse; do
    start_relay "$transport"
    sleep 1
    idle_kib=$(rss_kib "$relay_pid")
    # waiters.py exits 1 when a waiter failed; its JSON line still counts (the table shows the failures).
    result=$(python3 "$root/Benchmarks/waiters.py" --target relay --transport "$transport" --n "$N" --rate "$RATE" \
        --open-rate 3000 --end-settle 65 --base "http://127.0.0.1:$port" --api-key "$key" --pids "$relay_pid" \
        --tap-from 127.0.0.2 2>>"$out/waiters.err" | tail -1) || true
    with_fields "$result" transport="$transport" startup_ms="$startup_ms" idle_kib="$idle_kib" >>"$out/relay.jsonl"
    stop_relay
done

echo "== LinkRelay + webhooks: the same waiters, with a webhook receiver on loopback" >&2
# webhook-receiver.py answers 204 at once and keeps, per message, its arrival minus the body's timestamp.
secret="whsec_$(head -c 32 /dev/urandom | base64)"
python3 "$root/Benchmarks/webhook-receiver.py" --port $((port + 90)) --control-port $((port + 91)) --secret "$secret" \
    >"$out/receiver.json" 2>"$out/receiver.err" &
receiver_pid=$!
trap 'stop_relay; kill -TERM "$receiver_pid" 2>/dev/null || true' EXIT
receiver() { curl -sf -X "$1" "http://127.0.0.1:$((port + 91))/$2" "${@:3}"; }
until receiver GET stats >/dev/null 2>&1; do
    kill -0 "$receiver_pid" 2>/dev/null || { echo "the webhook receiver did not start: $out/receiver.err" >&2; exit 1; }
    sleep 0.05
done
: >"$out/relay-webhooks.jsonl"
for transport in longpoll ws sse; do
    start_relay "webhooks-$transport" --webhook-url "http://127.0.0.1:$((port + 90))/hooks" --webhook-secret "$secret"
    receiver POST mark >/dev/null
    result=$(python3 "$root/Benchmarks/waiters.py" --target relay --transport "$transport" --n "$N" --rate "$RATE" \
        --open-rate 3000 --end-settle 2 --base "http://127.0.0.1:$port" --api-key "$key" --pids "$relay_pid" \
        --tap-from 127.0.0.2 --trace "$out/webhooks-$transport.trace" 2>>"$out/waiters.err" | tail -1) || true
    # Every session that got its result has two messages coming (session.tapped, session.verified): up to 60 s.
    awk '!/^#/ && $3 != "-" {print $4}' "$out/webhooks-$transport.trace" >"$out/webhooks-$transport.ids"
    want=$((2 * $(wc -l <"$out/webhooks-$transport.ids")))
    for _ in $(seq 120); do
        [ "$(receiver GET stats | python3 -c 'import json, sys; print(json.load(sys.stdin)["window"]["delivered"])')" -ge "$want" ] && break
        sleep 0.5
    done
    webhooks=$(receiver GET stats | python3 -c 'import json, sys; print(json.dumps(json.load(sys.stdin)["window"]))') || webhooks={}
    check=$(receiver POST check -H 'Content-Type: application/json' -d "{\"sessions_file\": \"$out/webhooks-$transport.ids\",
        \"types\": [\"session.tapped\", \"session.verified\"]}") || check={}
    python3 -c 'import json, sys
r = json.loads(sys.argv[1] or "{}")
r.update(transport=sys.argv[2], webhooks=json.loads(sys.argv[3]), check=json.loads(sys.argv[4]))
print(json.dumps(r))' "$result" "$transport" "$webhooks" "$check" >>"$out/relay-webhooks.jsonl"
    stop_relay
done
receiver GET stats >"$out/receiver-total.json" || echo '{}' >"$out/receiver-total.json"
kill -TERM "$receiver_pid" 2>/dev/null || true
wait "$receiver_pid" 2>/dev/null || true
trap stop_relay EXIT

echo "== LinkRelay: landing throughput (wrk on a valid repeat landing)" >&2
start_relay landing
landing=$(bash "$root/Benchmarks/repeat-landing.sh" "$port" "$key")
page_bytes=$(curl -s "$landing" | wc -c)
landing_rps=$(wrk -t2 -c64 -d10s "$landing" | awk '/Requests\/sec/ {print $2}')
stop_relay

echo "== LinkRelay: $SOAK whole sessions, against a separate sandbox so that its memory is left out" >&2
"$bin" sandbox --host 127.0.0.1 --port $((port + 1)) >"$out/sandbox.log" 2>&1 &
sandbox_pid=$!
sandbox=(--prove "http://127.0.0.1:$((port + 1))/sandbox/prove")
start_relay soak "${sandbox[@]}"
sleep 1
soak_start_kib=$(rss_kib "$relay_pid")
# At rest: 100 sessions, then the same 65 s as after the soak; soak.py's idle is read after that, so that
# start and end both come after the code and type metadata any session touches (README, Performance).
(cd "$root/Benchmarks" && python3 soak.py --sessions 100 --batch 100 --base "http://127.0.0.1:$port" \
    --sandbox "http://127.0.0.1:$((port + 1))" --api-key "$key" --pid "$relay_pid" --settle 65 >/dev/null) || true
soak=$(cd "$root/Benchmarks" && python3 soak.py --sessions "$SOAK" --base "http://127.0.0.1:$port" \
    --sandbox "http://127.0.0.1:$((port + 1))" --api-key "$key" --pid "$relay_pid" --settle 65 | tail -1) || true
stop_relay
with_fields "$soak" start_kib="$soak_start_kib" >"$out/soak.json"

echo "== LinkRelay: $N WebSockets that come and go, against the same sandbox (memory after they went)" >&2
start_relay gone "${sandbox[@]}"
sleep 1
gone_start_kib=$(rss_kib "$relay_pid")
# At rest, as for the soak: 100 WebSockets come and go first, and 65 s pass.
python3 "$root/Benchmarks/waiters.py" --target relay --transport ws --n 100 --rate 100 --end-settle 65 \
    --base "http://127.0.0.1:$port" --sandbox "http://127.0.0.1:$((port + 1))" --api-key "$key" \
    --pids "$relay_pid" --tap-from 127.0.0.2 >/dev/null 2>>"$out/waiters.err" || true
gone_idle_kib=$(rss_kib "$relay_pid")
gone=$(python3 "$root/Benchmarks/waiters.py" --target relay --transport ws --n "$N" --rate "$RATE" --open-rate 3000 \
    --end-settle 65 --base "http://127.0.0.1:$port" --sandbox "http://127.0.0.1:$((port + 1))" --api-key "$key" \
    --pids "$relay_pid" --tap-from 127.0.0.2 2>>"$out/waiters.err" | tail -1) || true
stop_relay
kill "$sandbox_pid" 2>/dev/null || true
with_fields "$gone" idle_kib="$gone_idle_kib" start_kib="$gone_start_kib" >"$out/gone.json"

echo "== LinkRelay: session creation against the embedded sandbox" >&2
start_relay create
create=$(python3 - "$port" "$key" <<'EOF'
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
        await asyncio.gather(*(one(i) for i in range(200)))  # warm-up
        t0 = time.monotonic()
        statuses = await asyncio.gather(*(one(i) for i in range(5000)))
        took = time.monotonic() - t0
        print(round(5000 / took), sum(1 for s in statuses if s != 201))
asyncio.run(main())
EOF
)
stop_relay

echo "== LinkRelay: two instances on PostgreSQL ($N waiters on B, landings on A, 500 taps/s)" >&2
two=$(bash "$root/Benchmarks/two-instances.sh" "$N" 500 ws "$bin" 2>"$out/two-instances.err" | tail -1) || true
echo "${two:-{\}}" >"$out/two-instances.json"

python3 - "$out" "$landing_rps" "$page_bytes" "$create" "$RATE" <<'EOF'
import json, sys
out, landing_rps, page_bytes, create = sys.argv[1], float(sys.argv[2] or 0), sys.argv[3], sys.argv[4].split()
rate = float(sys.argv[5])
anchors = [json.loads(l) for l in open(f"{out}/anchors.jsonl") if l.startswith("{")]
relay = [json.loads(l) for l in open(f"{out}/relay.jsonl") if l.startswith("{")]
hooked = [json.loads(l) for l in open(f"{out}/relay-webhooks.jsonl") if l.startswith("{")]
def find(rows, **kw):
    return next((r for r in rows if all(r.get(k) == v for k, v in kw.items())), {})
def num(row, *path):
    for p in path:
        row = row.get(p, {}) if isinstance(row, dict) else {}
    return row if isinstance(row, (int, float)) else None
def fmt(v, unit=""):
    return "-" if v is None else (f"{v:,.2f}{unit}" if isinstance(v, float) else f"{v:,}{unit}")
def ratio(a, b):
    return "-" if a is None or b in (None, 0) else f"{a / b:.2f}x"
nchan_by = {t: find(anchors, target="nchan", transport=t) for t in ("longpoll", "ws", "sse")}
pushpin = find(anchors, target="pushpin")
static = find(anchors, target="nginx-static")
print(f"\nresults in {out}\n")
print("| figure | LinkRelay | nchan | Pushpin | LinkRelay / nchan | LinkRelay + webhooks |")
print("|---|---|---|---|---|---|")
for transport, nchan in nchan_by.items():
    r = find(relay, transport=transport)
    h = find(hooked, transport=transport)
    hw, hc = h.get("webhooks", {}), h.get("check", {})
    pp = pushpin if transport == "longpoll" else {}
    for label, path in (("KiB per waiter", ("kib_per_waiter",)), ("tap→tapped p50 ms", ("tapped_ms", "p50")),
                        ("tap→tapped p99 ms", ("tapped_ms", "p99"))):
        a, b, c = num(r, *path), num(nchan, *path), num(pp, *path)
        print(f"| {transport}: {label} | {fmt(a)} | {fmt(b)} | {fmt(c)} | {ratio(a, b)} | {fmt(num(h, *path))} |")
    print(f"| {transport}: tap→result p50 / p99 ms | {fmt(num(r, 'result_ms', 'p50'))} / {fmt(num(r, 'result_ms', 'p99'))} | | | "
          f"| {fmt(num(h, 'result_ms', 'p50'))} / {fmt(num(h, 'result_ms', 'p99'))} |")
    print(f"| {transport}: RSS MiB idle / {r.get('n', '-')} open / after they went | "
          f"{fmt(round(r.get('idle_kib', 0) / 1024, 1))} / {fmt(num(r, 'rss_after_mib'))} / {fmt(num(r, 'rss_end_mib'))} | | | "
          f"| - / {fmt(num(h, 'rss_after_mib'))} / - |")
    print(f"| {transport}: taps sent in s (at {r.get('n', 0) / rate:.0f} s on schedule) | {fmt(num(r, 'tap_s'))} | {fmt(num(nchan, 'tap_s'))} | {fmt(num(pp, 'tap_s'))} | "
          f"| {fmt(num(h, 'tap_s'))} |")
    print(f"| {transport}: failed / delivered | {r.get('failed', '-')} / {r.get('delivered', '-')} "
          f"| {nchan.get('failed', '-')} / {nchan.get('delivered', '-')} "
          f"| {pp.get('failed', '-')} / {pp.get('delivered', '-')} | | {h.get('failed', '-')} / {h.get('delivered', '-')} |")
    # The receiver's figures: first deliveries over the span from the first to the last, and each message's
    # arrival minus its body's timestamp (when the event happened).
    print(f"| {transport}: webhooks delivered/s; event→delivery p50 / p99 ms | | | | "
          f"| {fmt(num(hw, 'delivered_per_s'))}; {fmt(num(hw, 'event_to_delivery_ms', 'p50'))} / "
          f"{fmt(num(hw, 'event_to_delivery_ms', 'p99'))} |")
    missing = hc.get("missing", {})
    print(f"| {transport}: webhooks: sessions with both messages / with a result; duplicates | | | | "
          f"| {fmt(hc.get('complete'))} / {fmt(hc.get('expected'))}; {fmt(hw.get('duplicates'))} |")
srv = static.get("requests_per_s")
print(f"| landing requests/s ({page_bytes} B page; nginx: 100 B) | {fmt(landing_rps)} | {fmt(srv)} (nginx) | | {ratio(landing_rps, srv)} | |")
print(f"| session creations/s (failed) | {create[0] if create else '-'} ({create[1] if len(create) > 1 else '-'}) | | | | |")
def over(end, rest, start):
    return f" (end = {end / rest:.3f}x at rest, {end / start:.3f}x at start)" if end and rest and start else ""
soak = json.load(open(f"{out}/soak.json"))
soak_start = soak.get("start_kib", 0) / 1024
print(f"| {fmt(soak.get('sessions'))} whole sessions: finished, RSS MiB at start / at rest / after 1,000 / 65 s after the last | "
      f"{fmt(soak.get('finished'))} in {soak.get('seconds', '-')} s, {fmt(round(soak_start, 1))} / {soak.get('idle_mib', '-')} / "
      f"{soak.get('warm_mib', '-')} / {soak.get('end_mib', '-')}{over(soak.get('end_mib'), soak.get('idle_mib'), soak_start)} | | | | |")
gone = json.load(open(f"{out}/gone.json"))
gone_start, gone_idle = gone.get("start_kib", 0) / 1024, gone.get("idle_kib", 0) / 1024
gone_end = gone.get("rss_end_mib")
print(f"| {fmt(gone.get('n'))} WebSockets (separate sandbox): RSS MiB at start / at rest / open / 65 s after they went | "
      f"{fmt(round(gone_start, 1))} / {fmt(round(gone_idle, 1))} / {fmt(num(gone, 'rss_after_mib'))} / {fmt(gone_end)}"
      f"{over(gone_end, gone_idle, gone_start)}, {gone.get('failed', '-')} failed | | | | |")
two = json.load(open(f"{out}/two-instances.json"))
print(f"| two instances on PostgreSQL, WebSocket, 500 taps/s: landing on A → tapped on B p50 / p99 ms, result p99 ms, "
      f"failed / delivered | {fmt(num(two, 'tapped_ms', 'p50'))} / {fmt(num(two, 'tapped_ms', 'p99'))}, "
      f"{fmt(num(two, 'result_ms', 'p99'))}, {two.get('failed', '-')} / {two.get('delivered', '-')} | | | | |")
first = relay[0] if relay else {}
print(f"| start-up to ready ms | {first.get('startup_ms', '-')} | | | | |")
print(f"| idle RSS MiB | {fmt(round(first.get('idle_kib', 0) / 1024, 1))} | | | | |")
EOF
