#!/usr/bin/env python3
"""The cost of asking Nevis (issue 49): N Nevis sessions wait at once on a relay with the embedded
Nevis sandbox, and the relay asks each one's status as it does in production (1 s, backing off to 5 s,
with jitter).

  1. creates N push sessions for the sandbox user `dave` (a person answers them; nobody does here), and
     W app-channel sessions (QR code and link) whose WebSocket channels it opens;
  2. waits SETTLE seconds (the back-off reaches 5 s after about 20), then reads, over WINDOW seconds
     (or as long as the --during command runs, if longer), the status questions the relay asked per
     second (its /metrics) and the relay's CPU (/proc); --during runs a command meanwhile (nevis.sh:
     waiters.py's Unify taps) and its last line of output is reported as `during`;
  3. answers the W sessions' operations with Approve on the sandbox's app page, RATE a second, each
     as the phone's app would, and times Approve -> the `result` event on the desktop's channel.

Prints one JSON object. Benchmarks/nevis.sh runs it beside waiters.py's Unify taps.
Needs: pip install aiohttp (uvloop optional).
"""
import argparse, asyncio, base64, json, statistics, time, urllib.parse

import aiohttp

try:
    import uvloop
except ImportError:
    uvloop = None


def pct(values, p):
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(p / 100 * (len(ordered) - 1))))]


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime + stime
    return ticks / 100.0


async def status_questions(http, base):
    """Status questions the relay has asked Nevis so far (every status the sandbox answered with)."""
    async with http.get(f"{base}/metrics") as r:
        text = await r.text()
    total = 0.0
    for line in text.splitlines():
        if line.startswith("linkrelay_nevis_calls_total{") and 'endpoint="status"' in line:
            total += float(line.rsplit(" ", 1)[1])
    return total


def dispatch_token(app_link):
    """The token the app redeems, from the link's base64url `dispatchTokenResponse` (seed 004)."""
    query = urllib.parse.parse_qs(urllib.parse.urlparse(app_link).query)
    encoded = query["dispatchTokenResponse"][0]
    payload = json.loads(base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)))
    return payload["nma_data"]["token"]


async def main():
    p = argparse.ArgumentParser()
    p.add_argument("--base", default="http://127.0.0.1:8080")
    p.add_argument("--api-key", required=True)
    p.add_argument("--pid", type=int, required=True, help="the relay's process id, for its CPU")
    p.add_argument("--n", type=int, default=10000, help="push sessions left waiting")
    p.add_argument("--watched", type=int, default=200, help="app sessions approved and timed")
    p.add_argument("--create-concurrency", type=int, default=32)
    p.add_argument("--settle", type=float, default=25.0)
    p.add_argument("--window", type=float, default=30.0)
    p.add_argument("--rate", type=float, default=20.0, help="approvals per second")
    p.add_argument("--hold", type=int, default=600)
    p.add_argument("--during", default="", help="a shell command run during the window")
    a = p.parse_args()
    headers = {"Authorization": f"Bearer {a.api_key}", "Content-Type": "application/json"}
    # Unbounded: every watched desktop holds its WebSocket for the whole run.
    connector = aiohttp.TCPConnector(limit=0)
    async with aiohttp.ClientSession(connector=connector) as http:

        async def create(body):
            async with http.post(f"{a.base}/v1/sessions", data=json.dumps(body), headers=headers) as r:
                answer = await r.json()
                if r.status != 201:
                    raise RuntimeError(f"create: {r.status} {answer}")
                return answer

        started = time.monotonic()
        queue = asyncio.Queue()
        for _ in range(a.n):
            queue.put_nowait({"flow": "nevis", "username": "dave", "channel": "push", "holdSeconds": a.hold,
                              "message": "Sign in to the benchmark?"})

        async def creator():
            while not queue.empty():
                await create(queue.get_nowait())

        await asyncio.gather(*(creator() for _ in range(a.create_concurrency)))
        created_s = time.monotonic() - started
        watched = [await create({"flow": "nevis", "username": "dave", "holdSeconds": a.hold,
                                 "message": "Approve the benchmark's sign-in?"}) for _ in range(a.watched)]

        # Each watched desktop's channel, recording when `result` arrived.
        results = {}

        async def watch(session):
            url = session["channel"]["websocket"] + "?token=" + session["channel"]["token"]
            async with http.ws_connect(url, headers={"Origin": a.base}) as ws:
                async for message in ws:
                    event = json.loads(message.data)
                    if event.get("type") == "result":
                        results[session["sessionId"]] = (time.monotonic(), event.get("outcome"))
                        return

        watchers = [asyncio.create_task(watch(s)) for s in watched]

        await asyncio.sleep(a.settle)
        q0, c0, t0 = await status_questions(http, a.base), cpu_seconds(a.pid), time.monotonic()
        during = None
        if a.during:
            command = await asyncio.create_subprocess_shell(a.during, stdout=asyncio.subprocess.PIPE)
            output, _ = await command.communicate()
            lines = output.decode().strip().splitlines()
            during = json.loads(lines[-1]) if lines else None
        await asyncio.sleep(max(0.0, a.window - (time.monotonic() - t0)))
        q1, c1, t1 = await status_questions(http, a.base), cpu_seconds(a.pid), time.monotonic()

        approved = {}

        async def approve(session):
            token = dispatch_token(session["approval"]["appLink"])
            approved[session["sessionId"]] = time.monotonic()
            async with http.post(f"{a.base}/sandbox/nevis/app/answer",
                                 data={"token": token, "answer": "approve"}) as r:
                await r.read()

        for session in watched:
            asyncio.create_task(approve(session))
            await asyncio.sleep(1 / a.rate)
        await asyncio.wait_for(asyncio.gather(*watchers), timeout=60)

        latencies = [(results[i][0] - approved[i]) * 1000 for i in results if i in approved]
        print(json.dumps({
            "waiting": a.n + a.watched,
            "created_per_s": round(a.n / created_s, 1),
            "status_questions_per_s": round((q1 - q0) / (t1 - t0), 1),
            "relay_cpu_percent": round(100 * (c1 - c0) / (t1 - t0), 1),
            "approve_to_result_ms": {
                "p50": round(pct(latencies, 50), 1), "p99": round(pct(latencies, 99), 1),
                "max": round(max(latencies), 1), "mean": round(statistics.mean(latencies), 1),
            },
            "verified": sum(1 for r in results.values() if r[1] == "verified"),
            "watched": a.watched,
            "during": during,
        }))


if __name__ == "__main__":
    if uvloop:
        uvloop.install()
    asyncio.run(main())
