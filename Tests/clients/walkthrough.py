"""The README's walkthrough, driven by one HTTP client at a time, written down as a transcript.

Each client is an adapter with the library's natural defaults (what an integrator's code sends when it
writes the obvious call): curl as a subprocess, Python's requests, aiohttp and httpx. The walkthrough
is the same for all of them; it records what each step answered (`observe`), and test_matrix.py
compares every client's transcript with the one table in expectations.json. A step that fails is
written down and the walkthrough goes on, so that one refusal does not hide the steps after it.
The Node walkthrough (node/walkthrough.test.mjs) writes the same transcript; the browsers' is in
test_matrix.py, on the page's client.js.
"""

import asyncio
import json
import secrets
import subprocess
import threading
import urllib.parse

PHONE = "2001004014"  # the sandbox's test user whose desktop flow waits for a tap
DEADLINE = 30  # seconds any one step may take; CI shares two cores with a build
ID_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"


class Answer:
    """One HTTP answer: status, headers (lower-case name → every value, in order), raw body, and the
    URL it came from (after redirects, where the client followed them)."""

    def __init__(self, status, headers, body, url=None, sent=None):
        self.status = status
        self.headers = headers
        self.body = body
        self.url = url
        self.sent = sent  # the request's line and headers as the client sent them, where it tells

    def header(self, name):
        return self.headers.get(name, [])


def header_lists(pairs):
    headers = {}
    for name, value in pairs:
        headers.setdefault(name.lower(), []).append(value)
    return headers


def observe(answer, **derived):
    """What the transcript keeps of an answer: status, media type, JSON body, and derived facts."""
    types = answer.header("content-type")
    media = types[0].split(";")[0].strip().lower() if types else None
    try:
        body = json.loads(answer.body)
    except ValueError:
        body = None
    seen = {"status": answer.status, "type": media, "body": body, "derived": derived}
    if answer.sent:
        seen["sent"] = answer.sent
    return seen


def shown(method, url, headers):
    """A request as a failure message shows it: the credentials' values left out."""
    lines = [f"{method} {urllib.parse.urlsplit(url).path}"]
    for name, value in headers:
        lines.append(f"{name}: " + ("Bearer …" if name.lower() == "authorization" else value))
    return lines


def event_name(event):
    name = f"{event['seq']}:{event['type']}"
    return name + (f":{event['outcome']}" if event["type"] == "result" else "")


TERMINAL = {"result", "expired", "cancelled"}


def read_sse(lines):
    """Events from an iterator of text lines of an event stream, until it ends; yields dicts."""
    data = []
    for line in lines:
        line = line.rstrip("\r\n")
        if line == "":
            if data:
                yield json.loads("\n".join(data))
                data = []
        elif line.startswith("data:"):
            data.append(line[5:].lstrip(" "))


class Channel:
    """A waiting channel (SSE or WebSocket): `first()` reads the first event, `rest()` the others until
    the terminal one, and whether the channel then ended."""

    def first(self):
        raise NotImplementedError

    def rest(self):
        raise NotImplementedError

    def close(self):
        pass


class SSEChannel(Channel):
    def __init__(self, lines, closer):
        self.events = read_sse(lines)
        self.closer = closer

    def first(self):
        return [event_name(next(self.events))]

    def rest(self):
        seen = []
        for event in self.events:
            seen.append(event_name(event))
            if event["type"] in TERMINAL:
                break
        # The stream ends after a terminal event: the next read finds its end.
        ended = next(self.events, None) is None
        return seen, ended

    def close(self):
        self.closer()


# The clients. Each one's `request` sends what the library sends by default: `json=` where the library
# has it (curl: -d with the README's Content-Type), and a bodiless POST as the library's plain
# `post(url)` sends it.


class Curl:
    name = "curl"
    can_ws = False  # curl 7.88 (Debian 12) has no WebSocket

    def _run(self, arguments):
        done = subprocess.run(["curl", "-s", "-v", "-i", "--max-time", str(DEADLINE)] + arguments,
                              capture_output=True, timeout=DEADLINE + 5)
        if done.returncode != 0:
            raise RuntimeError(f"curl exited {done.returncode}: {done.stderr.decode()[-500:]}")
        # -v writes the request it sent as "> " lines on stderr.
        sent = [line[2:] for line in done.stderr.decode("iso-8859-1").splitlines() if line.startswith("> ")]
        self.sent = [line if not line.lower().startswith("authorization:") else "Authorization: Bearer …"
                     for line in sent if line]
        return done.stdout

    @staticmethod
    def _parse(raw, url):
        # With -L, -i prints every answer's head; the last is the answer.
        while True:
            head, _, rest = raw.partition(b"\r\n\r\n")
            status_line, *lines = head.decode("iso-8859-1").split("\r\n")
            status = int(status_line.split()[1])
            if 300 <= status < 400 and rest.startswith(b"HTTP/"):
                raw = rest
                continue
            pairs = [line.split(":", 1) for line in lines if ":" in line]
            return Answer(status, header_lists((name, value.strip()) for name, value in pairs), rest, url)

    def request(self, method, url, headers=None, json_body=None):
        arguments = []
        for name, value in (headers or {}).items():
            arguments += ["-H", f"{name}: {value}"]
        if json_body is not None:
            arguments += ["-H", "Content-Type: application/json", "-d", json.dumps(json_body)]
        if method != "GET":
            arguments += ["-X", method]
        answer = self._parse(self._run(arguments + [url]), url)
        answer.sent = self.sent
        return answer

    def follow(self, url):
        raw = self._run(["-L", "-w", "\n%{url_effective}", url])
        raw, _, effective = raw.rpartition(b"\n")
        return self._parse(raw, effective.decode())

    def sse(self, url):
        child = subprocess.Popen(["curl", "-sN", url], stdout=subprocess.PIPE, text=True)

        def close():
            child.kill()
            child.wait()

        return SSEChannel(iter(child.stdout.readline, ""), close)

    def close(self):
        pass


class Requests:
    name = "requests"
    can_ws = False

    def __init__(self):
        import requests

        self.session = requests.Session()

    def request(self, method, url, headers=None, json_body=None):
        response = self.session.request(method, url, headers=headers, json=json_body, timeout=DEADLINE,
                                        allow_redirects=False)
        return Answer(response.status_code, header_lists(response.raw.headers.items()), response.content, url,
                      shown(method, url, response.request.headers.items()))

    def follow(self, url):
        response = self.session.get(url, timeout=DEADLINE)
        return Answer(response.status_code, header_lists(response.raw.headers.items()), response.content,
                      response.url)

    def sse(self, url):
        import requests

        # A connection of its own, as a desktop's stream is.
        response = requests.get(url, stream=True, timeout=DEADLINE)
        return SSEChannel(response.iter_lines(decode_unicode=True), response.close)

    def close(self):
        self.session.close()


class Httpx:
    name = "httpx"
    can_ws = False

    def __init__(self):
        import httpx

        self.client = httpx.Client(timeout=DEADLINE)

    def request(self, method, url, headers=None, json_body=None):
        response = self.client.request(method, url, headers=headers, json=json_body)
        return Answer(response.status_code, header_lists(response.headers.multi_items()), response.content, url,
                      shown(method, url, response.request.headers.multi_items()))

    def follow(self, url):
        response = self.client.get(url, follow_redirects=True)
        return Answer(response.status_code, header_lists(response.headers.multi_items()), response.content,
                      str(response.url))

    def sse(self, url):
        import httpx

        stream = httpx.stream("GET", url, timeout=DEADLINE)
        response = stream.__enter__()
        return SSEChannel(response.iter_lines(), lambda: stream.__exit__(None, None, None))

    def close(self):
        self.client.close()


class Aiohttp:
    """aiohttp is asyncio-only: its calls run on a loop of their own in a thread, one at a time."""

    name = "aiohttp"
    can_ws = True

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        self.session = self.run(self._session())

    async def _session(self):
        import aiohttp

        return aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=DEADLINE))

    def run(self, coroutine):
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(DEADLINE + 5)

    def request(self, method, url, headers=None, json_body=None):
        async def send():
            async with self.session.request(method, url, headers=headers, json=json_body,
                                            allow_redirects=False) as response:
                return Answer(response.status, header_lists(response.headers.items()), await response.read(), url,
                              shown(method, url, response.request_info.headers.items()))

        return self.run(send())

    def follow(self, url):
        async def send():
            async with self.session.get(url) as response:
                return Answer(response.status, header_lists(response.headers.items()), await response.read(),
                              str(response.url))

        return self.run(send())

    def sse(self, url):
        response = self.run(self.session.get(url))

        def lines():
            while True:
                line = self.run(response.content.readline())
                if not line:
                    return
                yield line.decode()

        return SSEChannel(lines(), response.release)

    def ws(self, url):
        aiohttp_client = self

        class WebSocket(Channel):
            def __init__(self):
                self.socket = aiohttp_client.run(aiohttp_client.session.ws_connect(url))

            def _next(self):
                import aiohttp

                message = aiohttp_client.run(self.socket.receive())
                return json.loads(message.data) if message.type == aiohttp.WSMsgType.TEXT else None

            def first(self):
                return [event_name(self._next())]

            def rest(self):
                seen = []
                while True:
                    event = self._next()
                    if event is None:
                        break
                    seen.append(event_name(event))
                    if event["type"] in TERMINAL:
                        break
                # The server closes with 1000 after the terminal event.
                self._next()
                return seen, self.socket.closed and self.socket.close_code == 1000

            def close(self):
                aiohttp_client.run(self.socket.close())

        return WebSocket()

    def close(self):
        self.run(self.session.close())
        self.loop.call_soon_threadsafe(self.loop.stop)


CLIENTS = {client.name: client for client in (Curl, Requests, Aiohttp, Httpx)}


def unknown_id_like(session_id):
    """An id that no session has, of the same shape as a real one."""
    return "ses_" + "".join(secrets.choice(ID_ALPHABET) for _ in range(len(session_id) - 4))


def with_query(url, **parameters):
    return url + ("&" if "?" in url else "?") + urllib.parse.urlencode(parameters)


def walk(client, relay, key, other_origin):
    """Runs the walkthrough with `client` against `relay` (its base URL) with the API key `key`;
    `other_origin` is an origin another tenant allows. Returns the transcript: step → observation (or
    {"error": …}), plus "sessions": the ids whose webhooks the relay must send."""
    transcript = {}
    api = {"Authorization": f"Bearer {key}"}

    def step(name, action):
        try:
            transcript[name] = action()
        except Exception as error:  # written down; the next steps go on
            transcript[name] = {"error": f"{type(error).__name__}: {error}"}
        return transcript[name]

    idempotency_key = f"order-{client.name}-{secrets.token_hex(4)}"
    first = client.request("POST", f"{relay}/v1/sessions", {**api, "Idempotency-Key": idempotency_key},
                           {"phoneNumber": PHONE})
    transcript["create"] = observe(first)
    session = transcript["create"]["body"] or {}
    if first.status != 201:
        return transcript
    session_id, channel = session["sessionId"], session["channel"]
    token_query = {"token": channel["token"]}

    def again():
        answer = client.request("POST", f"{relay}/v1/sessions", {**api, "Idempotency-Key": idempotency_key},
                                {"phoneNumber": PHONE})
        return observe(answer, sameSession=(json.loads(answer.body or b"{}").get("sessionId") == session_id))

    step("create_again", again)

    # The desktop waits on every transport the client has, each first seeing `waiting`.
    channels = {}
    for name, opened in (("wait_sse", lambda: client.sse(with_query(channel["events"], **token_query))),
                         ("wait_ws", lambda: client.ws(with_query(channel["websocket"], **token_query)))):
        if name == "wait_ws" and not client.can_ws:
            continue
        try:
            channels[name] = opened()
            channels[name].seen = channels[name].first()
        except Exception as error:
            transcript[name] = {"error": f"{type(error).__name__}: {error}"}
            channels.pop(name, None)
    polled = []

    def poll(after, timeout):
        answer = client.request("GET", with_query(channel["poll"], after=after, timeout=timeout, **token_query))
        if answer.status != 200:
            raise AssertionError(f"long-poll answered {answer.status}: {answer.body[:300]!r}")
        body = json.loads(answer.body)
        polled.extend(event_name(event) for event in body["events"])
        return body

    try:
        poll(0, 5)
    except Exception as error:
        transcript["wait_poll"] = {"error": f"{type(error).__name__}: {error}"}

    # The phone: the newest SMS in the sandbox's outbox, its link followed through Prove's redirect.
    outbox = step("outbox", lambda: observe(client.request("GET", f"{relay}/sandbox/outbox?phoneNumber={PHONE}")))
    messages = ((outbox.get("body") or {}).get("messages")) or []

    def tap():
        landed = client.follow(messages[-1]["link"])
        query = urllib.parse.parse_qs(urllib.parse.urlsplit(landed.url).query)
        path = urllib.parse.urlsplit(landed.url).path
        return observe(landed, landedWithAscTrue=path.startswith("/l/") and query.get("asc") == ["true"])

    step("tap", tap)

    for name, opened in channels.items():
        def rest(opened=opened):
            more, ended = opened.rest()
            return {"events": opened.seen + more, "ended": ended}

        step(name, rest)
        opened.close()

    if "wait_poll" not in transcript:
        def poll_until_done():
            after = len(polled)
            for _ in range(10):
                body = poll(after, 25)
                after = body["after"]
                if body["done"]:
                    return {"events": polled, "ended": True}
            return {"events": polled, "ended": False}

        step("wait_poll", poll_until_done)

    step("read", lambda: observe(client.request("GET", f"{relay}/v1/sessions/{session_id}", api)))
    finish = f"{relay}/v1/sessions/{session_id}/finish"
    bearer = {"Authorization": f"Bearer {channel['token']}"}
    step("finish_ended_token", lambda: observe(client.request("POST", finish, bearer)))
    step("finish_ended_key", lambda: observe(client.request("POST", finish, api)))

    # Another session, which waits: finish asks Prove (202), cancel ends it, a second cancel is a 409.
    other = client.request("POST", f"{relay}/v1/sessions", api, {"phoneNumber": PHONE})
    waiting = json.loads(other.body) if other.status == 201 else None
    transcript["sessions"] = [session_id] + ([waiting["sessionId"]] if waiting else [])
    if waiting:
        base = f"{relay}/v1/sessions/{waiting['sessionId']}"
        waiting_bearer = {"Authorization": f"Bearer {waiting['channel']['token']}"}
        step("finish_waiting_token", lambda: observe(client.request("POST", base + "/finish", waiting_bearer)))
        step("finish_waiting_key", lambda: observe(client.request("POST", base + "/finish", api)))
        step("finish_wrong_token", lambda: observe(client.request(
            "POST", base + "/finish", {"Authorization": "Bearer " + "x" * len(waiting["channel"]["token"])})))
        step("cancel", lambda: observe(client.request("POST", base + "/cancel", api)))
        step("cancel_again", lambda: observe(client.request("POST", base + "/cancel", api)))

    # Refusals on the long-poll: a wrong token answers exactly as an unknown id does.
    wrong = "x" * len(channel["token"])
    unknown_poll = channel["poll"].replace(session_id, unknown_id_like(session_id))
    unknown = step("poll_unknown", lambda: client.request("GET", with_query(unknown_poll, token=wrong, timeout=0)))

    def wrong_token():
        answer = client.request("GET", with_query(channel["poll"], token=wrong, timeout=0))
        same = isinstance(unknown, Answer) and (
            answer.status, answer.body, answer.header("content-type"), sorted(set(answer.headers) - {"date"})
        ) == (unknown.status, unknown.body, unknown.header("content-type"), sorted(set(unknown.headers) - {"date"}))
        return observe(answer, sameAsUnknown=same)

    step("poll_wrong_token", wrong_token)
    if isinstance(unknown, Answer):
        transcript["poll_unknown"] = observe(unknown)
    step("poll_no_token", lambda: observe(client.request("GET", with_query(channel["poll"], timeout=0))))

    def refused_origin():
        answer = client.request("GET", with_query(channel["poll"], timeout=0, **token_query), {"Origin": other_origin})
        return observe(answer, allowOrigin=answer.header("access-control-allow-origin"))

    step("refused_origin", refused_origin)
    return transcript
