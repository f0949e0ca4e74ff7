#!/usr/bin/env python3
"""Latency of one tap at a time, with nothing else going on: the length of the relay's path.

Creates --n sessions against a running relay with the embedded sandbox, and for each in turn opens a
WebSocket, sends the landing on a raw socket (already connected, so no connect is timed) and times
the landing's answer and the `tapped` and `result` events from the moment the request was sent.
Prints the p50, min and max of each, in ms.

  linkrelay serve --port 18700 --store sqlite:/tmp/t.sqlite --limits off --api-key KEY --hold 600 &
  Benchmarks/tapprobe.py --api-key KEY

Needs: pip install aiohttp.
"""
import argparse, asyncio, socket, time

import aiohttp

from waiters import Relay


async def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--base", default="http://127.0.0.1:18700")
    p.add_argument("--api-key", required=True)
    p.add_argument("--n", type=int, default=50)
    p.add_argument("--phone", default="2001004014")
    a = p.parse_args()
    host, port = a.base.split("://", 1)[1].split(":")
    loop = asyncio.get_running_loop()
    timings = {"landing": [], "tapped": [], "result": []}
    async with aiohttp.ClientSession() as http:
        a.sandbox = ""  # the relay's embedded sandbox
        sessions = [w["session"] | {"landing": w["landing"].split(f":{port}", 1)[1]}
                    for w in await Relay(a, http).prepare(a.n)]
        for s in sessions:
            channel = s["channel"]
            async with http.ws_connect(f"{channel['websocket']}?token={channel['token']}") as ws:
                await ws.receive()  # `waiting`
                sock = socket.create_connection((host, int(port)))
                sock.setblocking(False)
                sent = time.monotonic()
                await loop.sock_sendall(sock, f"GET {s['landing']} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())

                async def answer():
                    await loop.sock_recv(sock, 65536)
                    return time.monotonic()

                async def events():
                    seen = {}
                    while "result" not in seen:
                        text = (await ws.receive()).data
                        for kind in ("tapped", "result"):
                            if f'"{kind}"' in text:
                                seen.setdefault(kind, time.monotonic())
                    return seen

                answered, seen = await asyncio.gather(answer(), events())
                sock.close()
            timings["landing"].append(answered - sent)
            for kind in ("tapped", "result"):
                timings[kind].append(seen[kind] - sent)
    for name, values in timings.items():
        values.sort()
        print(f"{name}: p50 {values[len(values) // 2] * 1e3:.3f} min {values[0] * 1e3:.3f} max {values[-1] * 1e3:.3f} ms")


asyncio.run(main())
