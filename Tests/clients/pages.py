"""The walkthrough's channel steps in a browser, with the page's own /v1/client.js: Chromium through
Playwright, Firefox through WebDriver BiDi (Tests/browser/firefox.py). The backend's steps (create,
read, cancel, the API key's finish) are not a page's: the test does them, as the integrator's backend
would. The page is on the integrator's origin and loads client.js from the relay, as in
Tests/browser/test_client.py; the phone's tap is a navigation in another tab."""

import json
import time

from walkthrough import DEADLINE, PHONE, unknown_id_like, with_query

TRANSPORTS = [("wait_ws", ()), ("wait_sse", ("WebSocket",)), ("wait_poll", ("WebSocket", "EventSource"))]
# How long a page is given for onError after a refusal before the step is written down as never heard.
ONERROR_SECONDS = 10

FINISH = """async ([session, channel]) => {
  try { return {answer: await LinkRelay.finish(session, channel)}; }
  catch (error) { return {status: error.status, problem: error.problem, thrown: String(error)}; } }"""

FETCH = """async (url) => {
  const response = await fetch(url, {cache: "no-store", credentials: "omit"});
  return {status: response.status, type: response.headers.get("content-type"), body: await response.text()}; }"""


class ChromiumPages:
    name = "chromium"

    def __init__(self, browser):
        self.context = browser.new_context()

    def open(self, url, missing=(), init=""):
        page = self.context.new_page()
        if missing or init:
            page.add_init_script("".join(f"delete window.{name};" for name in missing) + init)
        page.goto(url)
        return page

    def call(self, page, function, argument=None):
        return page.evaluate(function, argument)

    def navigate(self, url):
        page = self.context.new_page()
        response = page.goto(url)
        return response.status, page.url

    def close(self):
        self.context.close()


class FirefoxPages:
    name = "firefox"

    def __init__(self, firefox):
        self.firefox = firefox
        self.tabs = []

    def open(self, url, missing=(), init=""):
        tab = self.firefox.new_tab()
        # Firefox reports each connection the relay refuses as a page error; a refusal is what some
        # steps test, and the transcript says what the page saw.
        self.tabs.append(tab)
        if missing or init:
            tab.add_init_script("".join(f"delete window.{name};" for name in missing) + init)
        tab.goto(url)
        return tab

    def call(self, tab, function, argument=None):
        return tab.call(function, argument)

    def navigate(self, url):
        tab = self.open(url)
        entry = tab.evaluate("(() => { const n = performance.getEntriesByType('navigation')[0];"
                             " return [n.responseStatus, location.href]; })()")
        return entry[0], entry[1]

    def close(self):
        for tab in self.tabs:
            self.firefox.close_tab(tab)


def wait_for(pages, page, expression, until, seconds=DEADLINE):
    end = time.monotonic() + seconds
    while True:
        value = pages.call(page, "() => (" + expression + ")")
        if until(value):
            return value
        if time.monotonic() > end:
            return value
        time.sleep(0.05)


def events_of(calls):
    """The page's handler calls ("event:3:result", "result:verified:3") as the transcript's events."""
    seen = []
    for call in calls:
        if call.startswith("event:"):
            _, seq, kind = call.split(":")
            outcome = [c.split(":")[1] for c in calls if c.startswith("result:") and c.endswith(":" + seq)]
            seen.append(f"{seq}:{kind}" + (f":{outcome[0]}" if kind == "result" and outcome else ""))
    return seen


def walk(pages, backend, relay, shop, other, waiting_page):
    """`backend(method, path, body=None)` is the integrator's backend (API key); `shop` and `other` are
    the integrator's web servers of the tenant and of another tenant; `waiting_page(relay)` is the
    page of Tests/browser/conftest.py."""
    transcript = {}

    def step(name, action):
        try:
            transcript[name] = action()
        except Exception as error:
            transcript[name] = {"error": f"{type(error).__name__}: {error}"}

    status, created = backend("POST", "/v1/sessions", {"phoneNumber": PHONE})
    assert status == 201, created
    session_id, channel = created["sessionId"], created["channel"]
    page_url = shop.serve(waiting_page(relay))
    waiters = {}
    for name, missing in TRANSPORTS:
        try:
            page = pages.open(page_url, missing)
            pages.call(page, "channel => { window.waiting = start(channel); }", channel)
            wait_for(pages, page, "window.calls", lambda calls: "event:1:waiting" in calls)
            waiters[name] = page
        except Exception as error:
            transcript[name] = {"error": f"{type(error).__name__}: {error}"}

    def tap():
        status, url = pages.navigate(relay.newest_link(PHONE))
        landed = "/l/" in url and "asc=true" in url
        return {"status": status, "type": None, "body": None, "derived": {"landedWithAscTrue": landed},
                "unobservable": ["type"]}

    step("tap", tap)
    for name, page in waiters.items():
        def waited(page=page):
            calls = wait_for(pages, page, "window.calls", lambda calls: any(c.startswith("result:") for c in calls))
            ended = pages.call(page, "() => window.waiting.transport") is None
            return {"events": events_of(calls), "ended": ended}

        step(name, waited)

    shop_page = waiters.get("wait_ws") or pages.open(page_url)

    def finish(session, channel):
        answer = pages.call(shop_page, FINISH, [session, channel])
        if "answer" in answer:
            body = {key: value for key, value in answer["answer"].items() if key != "done"}
            return {"status": 200 if answer["answer"]["done"] else 202, "type": None, "body": body,
                    "derived": {}, "unobservable": ["type"]}
        return {"status": answer["status"], "type": None, "body": answer["problem"], "derived": {},
                "unobservable": ["type"], "thrown": answer["thrown"]}

    step("finish_ended_token", lambda: finish(session_id, channel))
    status, waiting = backend("POST", "/v1/sessions", {"phoneNumber": PHONE})
    assert status == 201, waiting
    transcript["sessions"] = [session_id, waiting["sessionId"]]
    step("finish_waiting_token", lambda: finish(waiting["sessionId"], waiting["channel"]))
    wrong = "x" * len(channel["token"])
    step("finish_wrong_token", lambda: finish(waiting["sessionId"], dict(waiting["channel"], token=wrong)))
    backend("POST", f"/v1/sessions/{waiting['sessionId']}/cancel")

    def fetched(url):
        answer = pages.call(shop_page, FETCH, url)
        try:
            body = json.loads(answer["body"])
        except ValueError:
            body = None
        media = (answer["type"] or "").split(";")[0].strip().lower() or None
        return {"status": answer["status"], "type": media, "body": body, "derived": {}, "raw": answer}

    unknown_poll = channel["poll"].replace(session_id, unknown_id_like(session_id))
    step("poll_unknown", lambda: fetched(with_query(unknown_poll, token=wrong, timeout=0)))

    def wrong_token():
        seen = fetched(with_query(channel["poll"], token=wrong, timeout=0))
        unknown = transcript.get("poll_unknown", {})
        same = "raw" in unknown and (seen["raw"] == unknown["raw"])
        seen["derived"] = {"sameAsUnknown": same}
        return seen

    step("poll_wrong_token", wrong_token)
    step("poll_no_token", lambda: fetched(with_query(channel["poll"], timeout=0)))

    def refused_origin():
        # A page on an origin that another tenant allows waits on the shop's session: client.js's
        # onError must hear the 403 (the browser reads it only with one Access-Control-Allow-Origin).
        status, fresh = backend("POST", "/v1/sessions", {"phoneNumber": PHONE})
        assert status == 201, fresh
        transcript["sessions"].append(fresh["sessionId"])
        page = pages.open(other.serve(waiting_page(relay)))
        pages.call(page, "channel => { window.waiting = start(channel); }", fresh["channel"])
        calls = wait_for(pages, page, "window.calls", lambda calls: any(c.startswith("error:") for c in calls),
                         ONERROR_SECONDS)
        backend("POST", f"/v1/sessions/{fresh['sessionId']}/cancel")
        if not any(c.startswith("error:") for c in calls):
            asked = pages.call(page, "() => performance.getEntriesByType('resource').map((e) => e.name)")
            raise AssertionError(f"onError was not called within {ONERROR_SECONDS} s; the page's calls: {calls}; "
                                 f"its requests: {asked[-6:]}")
        error = pages.call(page, "() => window.callsError")
        return {"status": error["status"], "type": None, "body": error["problem"], "derived": {},
                "unobservable": ["type", "allowOrigin"]}

    step("refused_origin", refused_origin)
    return transcript
