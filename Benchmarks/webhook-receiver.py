#!/usr/bin/env python3
"""A fast webhook receiver for the benchmarks: it takes the relay's POSTs, and measures them.

For each message it records the arrival time minus the body's `timestamp` (when the event happened:
both are this machine's wall clock), the message's `webhook-id` (a second arrival of one id is a
duplicate: delivery is at least once) and its session and type. It answers 204 at once and does not
verify every signature, to keep up; it verifies the first message and one in `--verify-every` with
the public `standardwebhooks` library, so that a run also shows the signatures are valid.

It can be told to be down for a while: `refuse` closes its listening socket and every connection (the
relay's connects are refused), `503` answers 503 to each message, `slow` answers each after
`--slow-seconds` (past the relay's 15 s attempt timeout by default: every attempt times out).

The relay posts to `http://127.0.0.1:PORT/` (any path). Control, on `--control-port` (which stays up
while the receiver is "down"):

  GET  /stats                  totals, and the current window: first deliveries, delivered/s,
                               event→delivery p50/p90/p99/max ms, duplicates, per-second peak
  POST /mark                   starts a new window
  POST /down?mode=refuse|503|slow   down until /up (or for &seconds=N)
  POST /up
  POST /check                  {"sessions_file": PATH, "types": [...]}: which sessions of the file
                               (one id a line) lack a message of a type; {"expected", "complete",
                               "missing": {type: n}, "sample": [...]}

Prints one JSON line with the totals when it ends (SIGTERM or SIGINT).
Needs: pip install aiohttp standardwebhooks (uvloop optional).
"""
import argparse, asyncio, json, signal, sys, time
from array import array
from datetime import datetime

from aiohttp import web

try:
    import uvloop
except ImportError:
    uvloop = None

from standardwebhooks.webhooks import Webhook, WebhookVerificationError


def pct(values, p):
    if not values:
        return None
    values = sorted(values)
    return round(values[min(len(values) - 1, max(0, int(round(p / 100.0 * (len(values) - 1)))))], 3)


class Window:
    """What arrived since the last /mark."""

    def __init__(self):
        self.started = time.time()
        self.delivered = 0  # first deliveries of a webhook-id
        self.duplicates = 0
        self.refused = 0  # answered 503 (or dropped) while down
        self.latency_ms = array("d")
        self.first_at = None
        self.last_at = None
        self.per_second = {}
        self.by_type = {}

    def summary(self):
        span = (self.last_at - self.first_at) if self.first_at is not None else 0
        lat = self.latency_ms
        return {
            "delivered": self.delivered, "duplicates": self.duplicates, "refused": self.refused,
            "by_type": self.by_type,
            "seconds": round(span, 3),
            "delivered_per_s": round(self.delivered / span, 1) if span > 0 else None,
            "peak_per_s": max(self.per_second.values()) if self.per_second else None,
            "event_to_delivery_ms": {"p50": pct(lat, 50), "p90": pct(lat, 90), "p99": pct(lat, 99),
                                      "max": round(max(lat), 3) if lat else None},
            "first_at": self.first_at, "last_at": self.last_at,
        }


class Receiver:
    def __init__(self, args):
        self.args = args
        self.webhook = Webhook(args.secret) if args.secret else None
        self.ids = set()
        self.sessions = {}  # session id → bit mask of the types received
        self.type_bits = {}
        self.window = Window()
        self.total = 0  # first deliveries, all windows
        self.posts = 0
        self.verified = 0
        self.verify_failed = []
        self.down = None  # None, "refuse" or "503"
        self.up_task = None
        self.runner = None

    def bit(self, type_):
        b = self.type_bits.get(type_)
        if b is None:
            b = self.type_bits[type_] = 1 << len(self.type_bits)
        return b

    async def hook(self, request):
        arrived = time.time()
        body = await request.read()
        w = self.window
        if self.down == "slow":
            w.refused += 1
            await asyncio.sleep(self.args.slow_seconds)
            return web.Response(status=self.args.status)
        if self.down is not None:
            w.refused += 1
            if self.down == "refuse":
                request.transport.close()  # a connection made just before going down: drop it
            return web.Response(status=503)
        self.posts += 1
        msg_id = request.headers.get("webhook-id", "")
        if self.webhook and (self.posts == 1 or self.posts % self.args.verify_every == 0):
            try:
                self.webhook.verify(body, {k.lower(): v for k, v in request.headers.items()})
                self.verified += 1
            except WebhookVerificationError as e:
                self.verify_failed.append(f"{msg_id}: {e}")
        if msg_id in self.ids:
            w.duplicates += 1
            return web.Response(status=self.args.status)
        self.ids.add(msg_id)
        message = json.loads(body)
        type_ = message.get("type", "?")
        happened = datetime.fromisoformat(message["timestamp"]).timestamp()
        session = message.get("data", {}).get("sessionId", "?")
        self.sessions[session] = self.sessions.get(session, 0) | self.bit(type_)
        self.total += 1
        w.delivered += 1
        w.latency_ms.append((arrived - happened) * 1000.0)
        if w.first_at is None:
            w.first_at = arrived
        w.last_at = arrived
        second = int(arrived)
        w.per_second[second] = w.per_second.get(second, 0) + 1
        w.by_type[type_] = w.by_type.get(type_, 0) + 1
        return web.Response(status=self.args.status)

    async def start_hooks(self):
        app = web.Application(client_max_size=1 << 20)
        app.router.add_route("POST", "/{tail:.*}", self.hook)
        self.runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
        await self.runner.setup()
        await web.TCPSite(self.runner, self.args.host, self.args.port, reuse_address=True, backlog=1024).start()

    async def go_down(self, mode, seconds):
        if self.down is None and mode == "refuse":
            self.down = mode
            runner, self.runner = self.runner, None
            await runner.cleanup()  # the listening socket and every open connection
        self.down = mode
        if seconds:
            self.up_task = asyncio.get_running_loop().call_later(seconds, lambda: asyncio.ensure_future(self.go_up()))

    async def go_up(self):
        if self.up_task:
            self.up_task.cancel()
            self.up_task = None
        if self.down == "refuse":
            await self.start_hooks()
        self.down = None

    def totals(self):
        return {
            "messages": self.total, "sessions": len(self.sessions), "posts_answered": self.posts,
            "verified": self.verified, "verify_failed": len(self.verify_failed),
            "verify_failures": self.verify_failed[:5], "down": self.down,
        }

    # Control
    async def stats(self, request):
        return web.json_response({"total": self.totals(), "window": self.window.summary()})

    async def mark(self, request):
        old = self.window.summary()
        self.window = Window()
        return web.json_response(old)

    async def down_route(self, request):
        mode = request.query.get("mode", "refuse")
        if mode not in ("refuse", "503", "slow"):
            return web.json_response({"error": "mode: refuse, 503 or slow"}, status=400)
        await self.go_down(mode, float(request.query.get("seconds", 0)))
        return web.json_response({"down": mode})

    async def up_route(self, request):
        await self.go_up()
        return web.json_response({"down": None})

    async def check(self, request):
        spec = await request.json()
        bits = {t: self.bit(t) for t in spec["types"]}
        expected = complete = 0
        missing = {t: 0 for t in bits}
        sample = []
        with open(spec["sessions_file"]) as f:
            for line in f:
                sid = line.strip()
                if not sid:
                    continue
                expected += 1
                got = self.sessions.get(sid, 0)
                lacks = [t for t, b in bits.items() if not got & b]
                if lacks:
                    for t in lacks:
                        missing[t] += 1
                    if len(sample) < 5:
                        sample.append({"session": sid, "lacks": lacks})
                else:
                    complete += 1
        return web.json_response({"expected": expected, "complete": complete, "missing": missing, "sample": sample})


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=18790, help="where the relay posts")
    p.add_argument("--control-port", type=int, default=18791)
    p.add_argument("--secret", default="", help="whsec_…: verify a sample of the signatures")
    p.add_argument("--verify-every", type=int, default=50, help="verify one message in this many")
    p.add_argument("--status", type=int, default=204, help="the answer to a message")
    p.add_argument("--down", choices=("refuse", "503", "slow"), help="start down, until POST /up")
    p.add_argument("--slow-seconds", type=float, default=20, help="how long `slow` takes to answer")
    args = p.parse_args()

    r = Receiver(args)
    if args.down:
        r.down = args.down
        if args.down in ("503", "slow"):
            await r.start_hooks()
    else:
        await r.start_hooks()
    control = web.Application()
    control.router.add_get("/stats", r.stats)
    control.router.add_post("/mark", r.mark)
    control.router.add_post("/down", r.down_route)
    control.router.add_post("/up", r.up_route)
    control.router.add_post("/check", r.check)
    crunner = web.AppRunner(control, access_log=None)
    await crunner.setup()
    await web.TCPSite(crunner, args.host, args.control_port, reuse_address=True).start()
    print(f"receiving on http://{args.host}:{args.port}/, control on :{args.control_port}", file=sys.stderr)

    stop = asyncio.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(s, stop.set)
    await stop.wait()
    print(json.dumps({"total": r.totals(), "window": r.window.summary()}))
    if r.runner:
        await r.runner.cleanup()
    await crunner.cleanup()


if __name__ == "__main__":
    if uvloop:
        uvloop.install()
    asyncio.run(main())
