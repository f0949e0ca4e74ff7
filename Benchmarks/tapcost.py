#!/usr/bin/env python3
"""CPU the relay spends per session creation and per tap (landing to result), read from /proc/PID/stat.

Creates --n sessions (--conc at a time) against a running relay with the embedded sandbox (or the one at
--sandbox, such as `linkrelay sandbox` for a relay on PostgreSQL), opens each
Instant Link in the sandbox (the phone's visit to Prove), then lands them all and waits until
/metrics counts every result. Prints, for each phase, the rate reached and the relay's CPU time
(user + system, all threads) per operation. No channel is open, so this is the cost of the work itself.

  linkrelay serve --port 18700 --store sqlite:/tmp/t.sqlite --limits off --api-key KEY --hold 600 &
  Benchmarks/tapcost.py --pid $! --api-key KEY [--perf-taps]

--perf-taps records the tap phase with `perf record --call-graph dwarf` (1,000 Hz) into tapcost.perf.data.
Needs: pip install aiohttp.
"""
import argparse, asyncio, os, signal, subprocess, time

import aiohttp


def cpu_seconds(pid):
    fields = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def results(http, base):
    async with http.get(f"{base}/metrics") as r:
        text = await r.text()
    return sum(int(float(line.split()[-1])) for line in text.splitlines() if line.startswith("linkrelay_outcomes_total"))


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="http://127.0.0.1:18700")
    p.add_argument("--sandbox", help="the sandbox's base URL when it is not the relay's (default: --base)")
    p.add_argument("--api-key", required=True)
    p.add_argument("--pid", type=int, required=True)
    p.add_argument("--n", type=int, default=3000)
    p.add_argument("--conc", type=int, default=64)
    p.add_argument("--phone", default="2001004014")
    p.add_argument("--perf-taps", action="store_true")
    a = p.parse_args()
    headers = {"Authorization": f"Bearer {a.api_key}"}
    async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=a.conc)) as http:
        gate = asyncio.Semaphore(a.conc)

        async def create(_):
            async with gate:
                async with http.post(f"{a.base}/v1/sessions", json={"phoneNumber": a.phone}, headers=headers) as r:
                    if r.status != 201:
                        raise RuntimeError(f"create: HTTP {r.status}: {await r.text()}")
                    return await r.json()

        cpu0, t0 = cpu_seconds(a.pid), time.time()
        sessions = await asyncio.gather(*(create(i) for i in range(a.n)))
        cpu1, t1 = cpu_seconds(a.pid), time.time()
        print(f"create: {a.n / (t1 - t0):.0f}/s, {(cpu1 - cpu0) / a.n * 1000:.3f} ms of relay CPU each")

        targets = {s["finalTargetUrl"] for s in sessions}
        async with http.get(f"{a.sandbox or a.base}/sandbox/outbox", params={"phoneNumber": a.phone}) as r:
            messages = (await r.json())["messages"]
        landings = []

        async def visit(message):
            async with gate:
                async with http.get(message["link"], allow_redirects=False) as r:
                    location = r.headers.get("Location", "")
            if location.split("?")[0] in targets:
                landings.append(location)

        await asyncio.gather(*(visit(m) for m in messages))
        before = await results(http, a.base)

        async def land(url):
            async with gate:
                async with http.get(url, allow_redirects=False) as r:
                    await r.read()

        recorder = None
        if a.perf_taps:
            recorder = subprocess.Popen(
                ["perf", "record", "-F", "1000", "--call-graph", "dwarf,16384", "-p", str(a.pid), "-o", "tapcost.perf.data"],
                stderr=subprocess.DEVNULL)
            time.sleep(0.5)
        cpu2, t2 = cpu_seconds(a.pid), time.time()
        await asyncio.gather(*(land(u) for u in landings))
        while await results(http, a.base) < before + len(landings):
            await asyncio.sleep(0.02)
        cpu3, t3 = cpu_seconds(a.pid), time.time()
        if recorder:
            recorder.send_signal(signal.SIGINT)
            recorder.wait()
        n = len(landings)
        print(f"tap to result: {n / (t3 - t2):.0f}/s, {(cpu3 - cpu2) / n * 1000:.3f} ms of relay CPU each")


asyncio.run(main())
