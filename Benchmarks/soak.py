#!/usr/bin/env python3
"""Leak check: runs many whole sessions through a relay and reports its memory before and after.

Each batch creates sessions, opens each Instant Link in the sandbox (the phone's visit to Prove),
lands on the relay, and long-polls every session until its result. Memory is the relay's resident
set (children included, as waiters.py reads it): at idle, after the first batch (warm), and at the
end, after the relay has had `--settle` seconds to let go. Run the relay against a separate
`linkrelay sandbox` (`--sandbox`) to leave the simulator's memory out: like Prove, it keeps every
flow for 15 minutes.

Prints one JSON object; exit 0 when every session got its result.
Needs: pip install aiohttp.
"""
import argparse, asyncio, json, sys, time, uuid

import aiohttp

from waiters import rss_kib


async def batch(http, a, size):
    headers = {"Authorization": f"Bearer {a.api_key}"}
    sem = asyncio.Semaphore(64)

    async def create(i):
        async with sem:
            body = {"phoneNumber": a.phone, "clientRequestId": f"soak-{uuid.uuid4().hex[:12]}"}
            async with http.post(f"{a.base}/v1/sessions", json=body, headers=headers) as r:
                if r.status != 201:
                    raise RuntimeError(f"create: HTTP {r.status}")
                return await r.json()

    sessions = await asyncio.gather(*(create(i) for i in range(size)))
    by_target = {s["finalTargetUrl"]: s for s in sessions}
    async with http.get(f"{a.sandbox or a.base}/sandbox/outbox", params={"phoneNumber": a.phone}) as r:
        messages = (await r.json())["messages"]

    async def land(m):
        async with sem:
            async with http.get(m["link"], allow_redirects=False) as r:
                location = r.headers.get("Location", "")
            if location.split("?")[0] in by_target:
                async with http.get(location, allow_redirects=False) as r:
                    await r.read()

    # This batch's links are the newest in the outbox.
    await asyncio.gather(*(land(m) for m in messages[-len(sessions):]))

    async def result(s):
        channel = s["channel"]
        after = 0
        while True:
            url = f"{channel['poll']}?token={channel['token']}&after={after}&timeout=30"
            async with http.get(url) as r:
                answer = await r.json()
            after = answer["after"]
            for event in answer["events"]:
                if event["type"] in ("result", "expired", "cancelled"):
                    return event["type"] == "result"
            if answer["done"]:
                return False

    done = await asyncio.gather(*(result(s) for s in sessions))
    return sum(1 for d in done if d)


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--sessions", type=int, default=100_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--base", default="http://127.0.0.1:8080")
    p.add_argument("--sandbox", help="a separate `linkrelay sandbox` (default: the relay's embedded one)")
    p.add_argument("--api-key", required=True)
    p.add_argument("--phone", default="2001004014")
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--settle", type=float, default=5.0)
    p.add_argument("--verbose", action="store_true", help="memory after each batch, on standard error")
    a = p.parse_args()

    idle = rss_kib([a.pid])
    finished, warm, t0 = 0, None, time.monotonic()
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=256)) as http:
        for start in range(0, a.sessions, a.batch):
            finished += await batch(http, a, min(a.batch, a.sessions - start))
            if warm is None:
                warm = rss_kib([a.pid])
            if a.verbose:
                print(f"{start + a.batch} sessions: {rss_kib([a.pid]) / 1024:.1f} MiB", file=sys.stderr)
    took = time.monotonic() - t0
    await asyncio.sleep(a.settle)
    end = rss_kib([a.pid])
    out = {
        "sessions": a.sessions, "finished": finished, "seconds": round(took, 1),
        "idle_mib": round(idle / 1024, 1), "warm_mib": round(warm / 1024, 1), "end_mib": round(end / 1024, 1),
        "end_over_idle": round(end / idle, 3), "end_over_warm": round(end / warm, 3),
    }
    print(json.dumps(out))
    return 0 if finished == a.sessions else 1


if __name__ == "__main__":
    raise SystemExit(asyncio.run(main()))
