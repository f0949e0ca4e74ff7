#!/usr/bin/env python3
"""Waiting-channel benchmark: hold N desktop-style waiters open, then "tap" each one.

LinkRelay's copy of ../shared/bench/waiters.py, with the same method (one process, one clock) and
nine additions:
  - taps are sent on schedule, each in its own task, at most --tap-concurrency at once (the
    original, --sequential-taps, waited for each landing's answer before the next tap, so the
    landing's latency capped the tap rate; unbounded, a relay that falls behind would be sent
    thousands of connections at once). A tap's clock starts when it is sent; tap_s shows the rate
    reached;
  - after every waiter has finished, the client has closed its connections and --end-settle seconds
    have passed, the servers' memory is read again (rss_end_mib), to show that channels that went
    away gave their memory back;
  - several instances: --channel-base opens each desktop's channel on another instance than the one
    that created the session (and takes the landing), --sandbox names a separate `linkrelay sandbox`;
  - --tap-from sends the taps from another local address than the waiters. With 15,000 waiters
    connected from 127.0.0.1 to one port, most of the kernel's ephemeral ports already carry a
    connection to that address and port, so each new connection's connect() searches the range
    for a free one: about 1.1 ms of this process's single thread each (0.03 ms from 127.0.0.2).
    Taps sent on schedule open new connections whenever more are in flight than the pool holds,
    and the search then holds up every waiter's clock; phones come from their own addresses;
  - once the waiters are open, everything this process holds is frozen out of Python's garbage
    collector (gc.freeze), so that its full collections during the taps do not walk the waiters'
    15,000 connections again: they took 150-700 ms each, and held up every clock meanwhile; and
    the collector is off until every waiter has its events, since even its collections of young
    objects took 30-170 ms now and then (one at 5 s into a long-poll run's taps made 116 of its
    272 taps over 2 ms); what they would free is freed after.
  - SSE waiters send `Accept: text/event-stream`, as a browser's EventSource does, so that nchan
    (which picks its transport by it) can be measured on SSE too.
  - --wait-from opens the waiters from another local address, so that runs one after another each
    find their ports free: the connections of the run before stay in TIME_WAIT for 60 s;
  - --trace FILE writes each tap's send time (seconds after the first, whose time.monotonic() is the
    file's first line: the clock `perf record -k CLOCK_MONOTONIC` stamps with), its latencies and its
    waiter's id (the session's, for the relay), so slow taps can be laid beside what the server did then.
  - a long-poll answered 408 (nchan's, when its subscriber timeout passes) is asked again, so that
    nchan can be held to the relay's 25-s long-poll (scaling.sh --anchors contract).

One process, one clock: every waiter records when its events arrived, every tap records when it
was sent, so tap->event latency needs no clock sync. Targets:

  nchan    nginx+nchan   (anchors/nchan.conf)   wait GET /sub/<id>, tap POST /pub/<id>
  pushpin  Pushpin       (anchors/pushpin.conf) wait GET /sub/<id>, tap POST :5561/publish/
  relay    LinkRelay     (../API.md)            create sessions, wait on each session's channel,
                                                 tap = the phone's landing after the sandbox link

For the relay two latencies are reported: landing -> `tapped` event, and landing -> `result`.
Memory: --pids lists server process ids; their resident memory (children included) is read from
/proc before and after the waiters are open, and reported per waiter.

Prints one JSON object last; exit 0 when every waiter got its event.
Needs: pip install aiohttp (uvloop optional).
"""
import argparse, asyncio, gc, json, os, statistics, sys, time, uuid

import aiohttp

try:
    import uvloop
except ImportError:  # plain asyncio works too, a little slower
    uvloop = None


def rss_kib(pids):
    """Resident memory of the given processes and all their descendants, in KiB."""
    seen, stack, total = set(), list(pids), 0
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/status") as f:
                for line in f:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            with open(f"/proc/{pid}/task/{pid}/children") as f:
                stack.extend(int(c) for c in f.read().split())
        except (FileNotFoundError, ProcessLookupError):
            pass
    return total


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return values[min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))]


def summary(ms):
    return {k: (round(v, 3) if v is not None else None) for k, v in {
        "p50": pct(ms, 50), "p90": pct(ms, 90), "p99": pct(ms, 99),
        "max": max(ms) if ms else None, "mean": statistics.fmean(ms) if ms else None}.items()}


class Target:
    """How to open one waiter, how to tap it, and which messages count as which event."""
    final = "tapped"

    def __init__(self, args, http, taps):
        self.args, self.http, self.taps = args, http, taps  # taps: the session taps go out on

    async def prepare(self, n):
        run = uuid.uuid4().hex[:8]  # fresh channel names: nothing buffered from an earlier run
        return [{"id": f"c{run}x{i}"} for i in range(n)]

    def wait_url(self, w):
        raise NotImplementedError

    async def tap(self, w):
        raise NotImplementedError

    def events_in(self, body):
        """Event types found in one message or long-poll answer."""
        return ["tapped"] if body.strip() else []

    def next_poll_url(self, w, url, body):
        return url


class Nchan(Target):
    base = "http://127.0.0.1:8201"

    def wait_url(self, w):
        return f"{self.base}/sub/{w['id']}"

    async def tap(self, w):
        async with self.taps.post(f"{self.base}/pub/{w['id']}", data='{"tapped":true}') as r:
            await r.read()
            return r.status


class Pushpin(Target):
    def wait_url(self, w):
        return f"http://127.0.0.1:7999/sub/{w['id']}"

    async def tap(self, w):
        item = {"channel": w["id"], "formats": {"http-response": {"body": '{"tapped":true}\n'}}}
        async with self.taps.post("http://127.0.0.1:5561/publish/", json={"items": [item]}) as r:
            await r.read()
            return r.status

    def events_in(self, body):
        return ["tapped"] if "tapped" in body else []


class Relay(Target):
    """LinkRelay, driven only through its public contract."""
    final = "result"

    async def prepare(self, n):
        a = self.args
        headers = {"Authorization": f"Bearer {a.api_key}"}
        sem = asyncio.Semaphore(64)

        async def one(i):
            async with sem:
                body = {"phoneNumber": a.phone, "clientRequestId": f"bench-{i}-{uuid.uuid4().hex[:8]}"}
                async with self.http.post(f"{a.base}/v1/sessions", json=body, headers=headers) as r:
                    if r.status != 201:
                        raise RuntimeError(f"create session: HTTP {r.status}: {(await r.text())[:200]}")
                    s = await r.json()
                return {"id": s["sessionId"], "session": s}

        waiters = await asyncio.gather(*(one(i) for i in range(n)))
        # The sandbox "sends" one Instant Link per session; opening it is the phone's visit to Prove,
        # whose redirect is the landing URL we tap later.
        by_target = {w["session"]["finalTargetUrl"]: w for w in waiters}
        async with self.http.get(f"{a.sandbox or a.base}/sandbox/outbox", params={"phoneNumber": a.phone}) as r:
            messages = (await r.json())["messages"] if r.status == 200 else []

        async def follow(m):
            async with sem:
                async with self.http.get(m["link"], allow_redirects=False) as r:
                    loc = r.headers.get("Location", "")
                w = by_target.get(loc.split("?")[0])
                if w is not None:
                    w["landing"] = loc

        await asyncio.gather(*(follow(m) for m in messages))
        return waiters

    def wait_url(self, w):
        ch = w["session"]["channel"]
        url = {"ws": ch["websocket"], "sse": ch["events"], "longpoll": ch["poll"]}[self.args.transport]
        if self.args.channel_base:
            url = url.replace(self.args.base.split("://", 1)[1], self.args.channel_base.split("://", 1)[1], 1)
        sep = "&" if "?" in url else "?"
        return f"{url}{sep}token={ch['token']}"

    async def tap(self, w):
        url = w.get("landing") or f"{w['session']['finalTargetUrl']}?asc=true&authId={uuid.uuid4()}"
        async with self.taps.get(url, allow_redirects=False) as r:
            await r.read()
            return r.status

    def events_in(self, body):
        found = []
        for token in ('"tapped"', '"result"', '"expired"', '"cancelled"'):
            if token in body:
                found.append(token.strip('"'))
        return found

    def next_poll_url(self, w, url, body):
        try:
            after = json.loads(body).get("after")
        except ValueError:
            return url
        base = url.split("&after=")[0]
        return f"{base}&after={after}" if after is not None else url


TARGETS = {"nchan": Nchan, "pushpin": Pushpin, "relay": Relay}


async def wait_longpoll(target, w, http, ready, seen):
    url = target.wait_url(w)
    if not ready.done():
        ready.set_result(None)
    deadline = time.monotonic() + target.args.hold
    while time.monotonic() < deadline:
        async with http.get(url, timeout=aiohttp.ClientTimeout(total=target.args.hold + 30)) as r:
            body = await r.text()
        if r.status == 408:  # nchan's answer when its subscriber timeout passes: ask again
            continue
        if r.status >= 400:
            raise RuntimeError(f"wait: HTTP {r.status}: {body[:120]}")
        now = time.monotonic()
        for ev in target.events_in(body):
            seen.setdefault(ev, now)
        if target.final in seen:
            return seen
        url = target.next_poll_url(w, url, body)
    raise TimeoutError("no final event before the hold ended")


async def wait_ws(target, w, http, ready, seen):
    async with http.ws_connect(target.wait_url(w), heartbeat=None, max_msg_size=0) as ws:
        if not ready.done():
            ready.set_result(None)
        async for msg in ws:
            if msg.type == aiohttp.WSMsgType.TEXT:
                now = time.monotonic()
                for ev in target.events_in(msg.data):
                    seen.setdefault(ev, now)
                if target.final in seen:
                    return seen
    raise RuntimeError("websocket closed before the final event")


async def wait_sse(target, w, http, ready, seen):
    async with http.get(target.wait_url(w), headers={"Accept": "text/event-stream"},
                        timeout=aiohttp.ClientTimeout(total=target.args.hold + 30)) as r:
        if r.status != 200:
            raise RuntimeError(f"sse: HTTP {r.status}")
        if not ready.done():
            ready.set_result(None)
        async for line in r.content:
            if line.startswith(b"data:"):
                now = time.monotonic()
                for ev in target.events_in(line.decode()):
                    seen.setdefault(ev, now)
                if target.final in seen:
                    return seen
    raise RuntimeError("event stream ended before the final event")


WAITERS = {"longpoll": wait_longpoll, "ws": wait_ws, "sse": wait_sse}


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--target", choices=TARGETS, required=True)
    p.add_argument("--n", type=int, default=1000, help="waiters held open at once")
    p.add_argument("--transport", choices=WAITERS, default="longpoll", help="sse: relay and nchan")
    p.add_argument("--rate", type=float, default=500.0, help="taps per second")
    p.add_argument("--hold", type=float, default=170.0, help="longest a waiter waits, seconds")
    p.add_argument("--open-rate", type=float, default=2000.0, help="waiters opened per second")
    p.add_argument("--pids", default="", help="comma-separated server pids for memory")
    p.add_argument("--settle", type=float, default=2.0, help="seconds to wait after opening")
    p.add_argument("--end-settle", type=float, default=2.0, help="seconds to wait at the end, before rss_end_mib")
    p.add_argument("--sequential-taps", action="store_true", help="wait for each tap's answer before the next")
    p.add_argument("--tap-concurrency", type=int, default=256, help="taps in flight at most")
    p.add_argument("--base", default="http://127.0.0.1:8080", help="relay: base URL")
    p.add_argument("--api-key", default=os.environ.get("LINKRELAY_API_KEY", ""), help="relay: API key")
    p.add_argument("--phone", default="2001004014", help="relay: sandbox test user")
    p.add_argument("--channel-base", default="", help="relay: open channels on this instance instead of --base")
    p.add_argument("--sandbox", default="", help="relay: base URL of a separate `linkrelay sandbox`")
    p.add_argument("--tap-from", default="", help="local address to send the taps from (e.g. 127.0.0.2)")
    p.add_argument("--wait-from", default="", help="local address to open the waiters (and create the sessions) from")
    p.add_argument("--trace", default="", help="write each tap's send time, latencies and waiter id to this file")
    args = p.parse_args()
    pids = [int(x) for x in args.pids.split(",") if x]

    conn = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, local_addr=(args.wait_from, 0) if args.wait_from else None)
    # The taps' connections: their own, from --tap-from, or else the waiters' pool.
    tap_conn = aiohttp.TCPConnector(limit=0, ttl_dns_cache=300, local_addr=(args.tap_from, 0)) if args.tap_from else conn
    async with aiohttp.ClientSession(connector=conn) as http, \
            aiohttp.ClientSession(connector=tap_conn, connector_owner=tap_conn is not conn) as tap_http:
        target = TARGETS[args.target](args, http, tap_http)
        t0 = time.monotonic()
        waiters = await target.prepare(args.n)
        prepare_s = time.monotonic() - t0
        rss_before = rss_kib(pids)

        wait = WAITERS[args.transport]
        tasks, readies, seens = [], [], []
        t0 = time.monotonic()
        for i, w in enumerate(waiters):
            ready = asyncio.get_running_loop().create_future()
            seen = {}
            readies.append(ready)
            seens.append(seen)
            tasks.append(asyncio.create_task(wait(target, w, http, ready, seen)))
            if args.open_rate and i % 100 == 99:
                await asyncio.sleep(100.0 / args.open_rate)
        await asyncio.gather(*readies)
        await asyncio.sleep(args.settle)
        open_s = time.monotonic() - t0
        early = sum(1 for t in tasks if t.done())
        rss_after = rss_kib(pids)

        sent, statuses = {}, {}
        gc.collect()
        gc.freeze()
        gc.disable()

        in_flight = asyncio.Semaphore(1 if args.sequential_taps else args.tap_concurrency)

        async def tap(i, w):
            async with in_flight:
                sent[i] = time.monotonic()
                st = await target.tap(w)
            statuses[st] = statuses.get(st, 0) + 1

        taps = []
        t0 = time.monotonic()
        for i, w in enumerate(waiters):
            if args.sequential_taps:
                await tap(i, w)
            else:
                taps.append(asyncio.create_task(tap(i, w)))
            lag = t0 + (i + 1) / args.rate - time.monotonic()
            if lag > 0:
                await asyncio.sleep(lag)
        await asyncio.gather(*taps)
        tap_s = time.monotonic() - t0
        results = await asyncio.gather(*tasks, return_exceptions=True)
        gc.enable()
    # After the client has closed its connections (kept-alive polls included).
    await asyncio.sleep(args.end_settle)
    rss_end = rss_kib(pids)

    lat = {"tapped": [], "result": []}
    errors = {}
    for i, r in enumerate(results):
        if isinstance(r, BaseException):
            key = type(r).__name__ + ": " + str(r)[:80]
            errors[key] = errors.get(key, 0) + 1
            continue
        for ev in lat:
            if ev in r:
                lat[ev].append((r[ev] - sent[i]) * 1000.0)
    if args.trace:
        # First line: the taps' start on time.monotonic() (CLOCK_MONOTONIC, as `perf record -k
        # CLOCK_MONOTONIC` stamps events); then per tap: seconds since then, ms to `tapped`, ms to `result`,
        # and the waiter's id.
        with open(args.trace, "w") as f:
            f.write(f"# t0 {t0:.6f}\n")
            for i, r in enumerate(results):
                if i in sent and not isinstance(r, BaseException):
                    ms = [f"{(r[ev] - sent[i]) * 1000.0:.3f}" if ev in r else "-" for ev in ("tapped", "result")]
                    f.write(f"{sent[i] - t0:.6f} {ms[0]} {ms[1]} {waiters[i]['id']}\n")
    delivered = len(lat[target.final])
    out = {
        "target": args.target, "transport": args.transport, "n": args.n,
        "delivered": delivered, "failed": args.n - delivered, "early": early,
        "errors": errors, "tap_statuses": statuses,
        "prepare_s": round(prepare_s, 2), "open_s": round(open_s, 2), "tap_s": round(tap_s, 2),
        "rss_before_mib": round(rss_before / 1024, 1), "rss_after_mib": round(rss_after / 1024, 1),
        "rss_end_mib": round(rss_end / 1024, 1),
        "kib_per_waiter": round((rss_after - rss_before) / max(1, args.n), 2) if pids else None,
        "tapped_ms": summary(lat["tapped"]),
    }
    if target.final == "result":
        out["result_ms"] = summary(lat["result"])
    print(json.dumps(out))
    return 0 if out["failed"] == 0 else 1


if __name__ == "__main__":
    if uvloop:
        uvloop.install()
    sys.exit(asyncio.run(main()))
