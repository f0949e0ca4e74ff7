#!/usr/bin/env bash
# The retention's purge under the benchmark's load (issue 46): does deleting SESSIONS ended sessions
# move the taps' latency? Relays on SQLite (a copy of one file each run), the embedded sandbox,
# --limits off, as run.sh starts them, with N waiters tapped at RATE a second (waiters.py), ROUNDS
# times in turn:
#
#   quiet  the file holds SESSIONS sessions that ended just now: nothing for the retention to do.
#   purge  the same sessions ended `--retention` days ago, less DUE seconds: the retention's pass
#          after that deletes all of them, in its batches, while the waiters wait and the taps come.
#
# /metrics is read every 0.2 s (linkrelay_retention_total{what="sessions"}), so the summary says when
# the purge ran against the taps' own clock; the taps sent while it ran are measured apart, and beside
# them the taps the quiet run sent at the same moments of its run.
#
#   Benchmarks/purge.sh [--n 15000] [--rate 1000] [--transport ws] [--sessions 100000] [--due 8]
#                       [--rounds 2] [--bin BIN]
#
# Raw results stay in the printed directory. STORE_DIR puts the SQLite files elsewhere (a tmpfs tells
# the disk's share apart). Needs pip install aiohttp uvloop.
set -euo pipefail
N=15000
RATE=1000
TRANSPORT=ws
SESSIONS=100000
DUE=8
ROUNDS=2
root=$(cd "$(dirname "$0")/.." && pwd)
bin=""
while [ $# -gt 0 ]; do
    case $1 in
        --n) N=$2 ;;
        --rate) RATE=$2 ;;
        --transport) TRANSPORT=$2 ;;
        --sessions) SESSIONS=$2 ;;
        --due) DUE=$2 ;;
        --rounds) ROUNDS=$2 ;;
        --bin) bin=$2 ;;
        *) sed -n '2,21p' "$0" >&2; exit 2 ;;
    esac
    shift 2
done
if [ -z "$bin" ]; then
    echo "== build (release)" >&2
    (cd "$root" && swift build -c release --product linkrelay >&2)
    bin=$(cd "$root" && swift build -c release --show-bin-path)/linkrelay
fi
out=$(mktemp -d /tmp/linkrelay-purge.XXXX)
store=${STORE_DIR:-$out}
mkdir -p "$store"
key=bench-api-key-0123456789abcdef
port=${LINKRELAY_BENCH_PORT:-18700}
ulimit -n 20000 2>/dev/null || true
echo "results in $out" >&2
(cd "$root" && git rev-parse --short HEAD 2>/dev/null) >"$out/commit" || true

relay_pid=""
stop_relay() {
    if [ -n "$relay_pid" ]; then
        kill -TERM "$relay_pid" 2>/dev/null || true
        wait "$relay_pid" 2>/dev/null || true
        relay_pid=""
    fi
}
trap stop_relay EXIT

# A relay on file $1 (kept as it is); further arguments go to `serve`.
start_relay() {
    local file=$1
    shift
    if curl -s "http://127.0.0.1:$port/readyz" >/dev/null; then
        echo "port $port is taken (LINKRELAY_BENCH_PORT chooses another)" >&2
        exit 1
    fi
    (cd "$root" && exec "$bin" serve --port "$port" --store "sqlite:$file" --limits off --api-key "$key" \
        --hold 600 "$@" >"$file.log" 2>&1) &
    relay_pid=$!
    until curl -sf "http://127.0.0.1:$port/readyz" >/dev/null; do
        kill -0 "$relay_pid" 2>/dev/null || { echo "the relay did not start: $file.log" >&2; exit 1; }
        sleep 0.02
    done
}

echo "== a file with $SESSIONS ended sessions" >&2
start_relay "$store/template.sqlite"
created=$(curl -sf -X POST "http://127.0.0.1:$port/v1/sessions" -H "Authorization: Bearer $key" \
    -H 'Content-Type: application/json' -d '{"phoneNumber":"2001004014"}')
id=$(python3 -c 'import json, sys; print(json.load(sys.stdin)["sessionId"])' <<<"$created")
curl -sf -X POST "http://127.0.0.1:$port/v1/sessions/$id/cancel" -H "Authorization: Bearer $key" >/dev/null
stop_relay
# The cancelled session, copied with ids and link keys of their own (its JSON too).
python3 - "$store/template.sqlite" "$id" "$SESSIONS" <<'EOF'
import sqlite3, sys
path, template, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(path)
link, data, events = db.execute("SELECT link_key, data, events FROM sessions WHERE id = ?", (template,)).fetchone()
rows = []
for n in range(count):
    sid, key = f"ses_purge{n:017d}", f"purge{n:017d}"
    rows.append((sid, key, data.replace(template, sid).replace(link, key), events))
with db:
    db.executemany(
        "INSERT INTO sessions (id, link_key, state, version, data, events, ended_at) VALUES (?, ?, 'cancelled', 2, ?, ?, 0)",
        rows)
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
EOF

# Copies the template to $1 with every copied session ended at $2 (milliseconds since 1970).
prepare() {
    rm -f "$1"*
    cp "$store/template.sqlite" "$1"
    python3 - "$1" "$2" <<'EOF'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
with db:
    db.execute("UPDATE sessions SET ended_at = ? WHERE id LIKE 'ses_purge%'", (int(sys.argv[2]),))
db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
db.close()
EOF
}

# Reads the relay's deletions every 0.2 s, with time.monotonic() (waiters.py's clock), to $1.
sample() {
    python3 - "$1" "http://127.0.0.1:$port/metrics" <<'EOF' &
import sys, time, urllib.request
out, url = open(sys.argv[1], "w", buffering=1), sys.argv[2]
while True:
    try:
        text = urllib.request.urlopen(url, timeout=2).read().decode()
    except OSError:
        break
    value = next((line.split()[-1] for line in text.splitlines()
                  if line.startswith('linkrelay_retention_total{what="sessions"}')), "0")
    out.write(f"{time.monotonic():.6f} {value}\n")
    time.sleep(0.2)
EOF
    sampler=$!
}

run() {  # name ended_at_ms
    prepare "$store/$1.sqlite" "$2"
    start_relay "$store/$1.sqlite"
    sample "$out/$1.samples"
    python3 "$root/Benchmarks/waiters.py" --target relay --transport "$TRANSPORT" --n "$N" --rate "$RATE" \
        --open-rate 3000 --end-settle 2 --base "http://127.0.0.1:$port" --api-key "$key" --pids "$relay_pid" \
        --tap-from 127.0.0.2 --trace "$out/$1.trace" 2>>"$out/waiters.err" | tail -1 >"$out/$1.json" || true
    # A purge run goes on until every session is deleted (at most 10 minutes more).
    if [[ $1 == purge* ]]; then
        for _ in $(seq 600); do
            awk -v want="$SESSIONS" 'END { exit !($2 >= want) }' "$out/$1.samples" && break
            sleep 1
        done
    fi
    stop_relay
    kill "$sampler" 2>/dev/null || true
    wait "$sampler" 2>/dev/null || true
}

now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
for round in $(seq "$ROUNDS"); do
    echo "== round $round: quiet, then purge" >&2
    echo "round $round: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/load.txt"
    run "quiet-$round" "$(now_ms)"
    run "purge-$round" "$(( $(now_ms) - 7 * 86400 * 1000 + DUE * 1000 ))"
done

python3 - "$out" "$ROUNDS" "$N" "$RATE" "$TRANSPORT" "$SESSIONS" <<'EOF'
import json, sys
out, rounds, n, rate, transport, sessions = sys.argv[1], int(sys.argv[2]), *sys.argv[3:]


def pct(values, p):
    values = sorted(values)
    return round(values[min(len(values) - 1, int(round(p / 100.0 * (len(values) - 1))))], 3) if values else None


def trace(name):
    """(t0, [(seconds after t0, tapped ms)])"""
    t0, taps = None, []
    for line in open(f"{out}/{name}.trace"):
        if line.startswith("# t0"):
            t0 = float(line.split()[2])
        elif not line.startswith("#"):
            at, tapped = line.split()[:2]
            if tapped != "-":
                taps.append((float(at), float(tapped)))
    return t0, taps


def window(name):
    """When the purge ran, in seconds after the taps' start: the first and last sample that moved."""
    t0, _ = trace(name)
    samples = [tuple(map(float, line.split())) for line in open(f"{out}/{name}.samples")]
    moved = [t for (t, v), (_, before) in zip(samples[1:], samples) if v > before]
    if not moved:
        return None
    start = max(t for t, v in samples if v == samples[0][1] and t <= moved[0])  # last sample before it moved
    return start - t0, moved[-1] - t0, int(samples[-1][1])


def fmt(v):
    return "-" if v is None else f"{v:,.2f}"


print(f"\nresults in {out}\n")
print(f"| {n} waiters on {transport}, {rate} taps/s, {sessions} ended sessions | quiet: tapped p50 / p99 ms | purge: tapped p50 / p99 ms | purge ran (s after the first tap), deleted | taps in that window: quiet p99 / purge p99 ms (count) |")
print("|---|---|---|---|---|")
for r in range(1, rounds + 1):
    quiet, purge = json.load(open(f"{out}/quiet-{r}.json")), json.load(open(f"{out}/purge-{r}.json"))
    span = window(f"purge-{r}")
    cells = [f"round {r}",
             f"{fmt(quiet['tapped_ms']['p50'])} / {fmt(quiet['tapped_ms']['p99'])}",
             f"{fmt(purge['tapped_ms']['p50'])} / {fmt(purge['tapped_ms']['p99'])}"]
    if span:
        a, b, deleted = span
        cells.append(f"{a:.1f} to {b:.1f}, {deleted:,}")
        q = [ms for at, ms in trace(f"quiet-{r}")[1] if a <= at <= b]
        p = [ms for at, ms in trace(f"purge-{r}")[1] if a <= at <= b]
        cells.append(f"{fmt(pct(q, 99))} / {fmt(pct(p, 99))} ({len(p):,})")
    else:
        cells += ["no purge seen", "-"]
    print("| " + " | ".join(cells) + " |")
print(f"\nFailed waiters: quiet {[json.load(open(f'{out}/quiet-{r}.json'))['failed'] for r in range(1, rounds + 1)]}, "
      f"purge {[json.load(open(f'{out}/purge-{r}.json'))['failed'] for r in range(1, rounds + 1)]}.")
print(f"Load averages (1, 5, 15 min) before each round: {'; '.join(open(f'{out}/load.txt').read().split(chr(10))).strip('; ')}.")
EOF
