"""Shared fixtures of the browser tests (pytest): real relay processes and a headless Chromium.

A test asks for what it needs by name:
  relay          a relay on the embedded sandbox, started for the test and stopped after it
  start_relay    starts more relays, with extra flags (`start_relay("--hold", "60")`); all stopped after
  sandbox        a `linkrelay sandbox` process, a Prove that outlives relay restarts
  integrator     a web server for an integrator's page on an origin of its own (http://127.0.0.2:PORT)
  browser        the headless Chromium (one for the whole run)
  new_context    new_context(**playwright_options) makes a browser context (e.g. with
                 http_credentials); an uncaught error in any of its pages fails the test
  context        a fresh browser context with the defaults, for the test
  page           a page in that context
  screenshot     screenshot(page, "name") writes .build/screenshots/name.png
  firefox_browser  the headless firefox-esr, driven over WebDriver BiDi (one for the whole run); skips
                 its tests where firefox-esr is missing, except in CI
  firefox        a tab of it in a user context of its own (firefox.Tab), closed after the test, which
                 fails if Firefox reported an error of a page of the tab (an uncaught exception, an
                 unhandled rejection, a CSP violation); `screenshot(firefox, "name")` works
See docs/browser-client.md.
"""

import importlib.util
import json
import os
import pathlib
import re
import secrets
import signal
import socket
import subprocess
import threading
import urllib.error
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from playwright.sync_api import expect, sync_playwright

from firefox import Firefox, wait_until

ROOT = pathlib.Path(__file__).resolve().parents[2]
BINARY = pathlib.Path(os.environ.get("LINKRELAY_BINARY", ROOT / ".build/debug/linkrelay")).resolve()
CHROMIUM = os.environ.get("LINKRELAY_CHROMIUM", "/usr/bin/chromium")
FIREFOX = os.environ.get("LINKRELAY_FIREFOX", "/usr/bin/firefox-esr")
SCREENSHOTS = ROOT / ".build/screenshots"
# The sandbox test user whose desktop flow waits for a tap (API.md, "Embedded Prove sandbox").
WAITING_USER = "2001004014"
# How long anything a test awaits may take: generous, because CI shares two cores with a build.
DEADLINE = 30

# Playwright's expect() polls its condition until this deadline.
expect.set_options(timeout=DEADLINE * 1000)


def http(method, url, body=None, headers=None):
    """One HTTP request without following redirects: (status, headers, parsed JSON body or text)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers=dict(headers or {}))
    if data is not None:
        request.add_header("Content-Type", "application/json")

    class NoRedirect(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *args, **kwargs):
            return None

    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(request, timeout=DEADLINE) as response:
            status, answer_headers, raw = response.status, response.headers, response.read()
    except urllib.error.HTTPError as error:
        status, answer_headers, raw = error.code, error.headers, error.read()
    text = raw.decode("utf-8", "replace")
    try:
        return status, answer_headers, json.loads(text)
    except ValueError:
        return status, answer_headers, text


def newest_link(sandbox_base, phone):
    status, _, answer = http("GET", f"{sandbox_base}/sandbox/outbox?phoneNumber={phone}")
    assert status == 200, answer
    return answer["messages"][-1]["link"]


def tap(link, query=""):
    """The phone taps an Instant Link: Prove's page answers 302 to the relay's landing, which the phone
    opens. With `query` "redirect=0", Prove's page completes the tap but the redirect is lost."""
    status, headers, body = http("GET", link + ("?" + query if query else ""))
    if query == "redirect=0":
        assert status == 200, body
        return
    assert status == 302, body
    status, _, body = http("GET", headers["Location"])
    assert status == 200, body


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Process:
    """A `linkrelay` child process whose output goes to a log file that the test reads."""

    def __init__(self, arguments, log_path, environment=None):
        self.arguments = arguments
        self.log_path = log_path
        self.environment = environment
        self.child = None

    def start(self, ready):
        """Starts the process; returns the match of the regular expression `ready` in what it logs."""
        path = pathlib.Path(self.log_path)
        before = path.stat().st_size if path.exists() else 0
        with open(self.log_path, "a") as log:
            shown = ["***" if previous == "--api-key" else word
                     for previous, word in zip([""] + self.arguments, self.arguments)]
            log.write("$ linkrelay " + " ".join(shown) + "\n")
            self.child = subprocess.Popen(
                [str(BINARY)] + self.arguments, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                env=dict(os.environ, **(self.environment or {})))

        def started():
            found = re.search(ready, self.log(since=before))
            if found:
                return found
            if self.child.poll() is not None:
                raise RuntimeError(f"{self.arguments[0]} exited with {self.child.returncode}:\n{self.log()}")
            return None

        return wait_until(started, f"'{ready}' in {self.log_path}", DEADLINE)

    def stop(self):
        """SIGTERM, as a service manager stops it; waits for the exit (kills it after the deadline)."""
        if self.child is None or self.child.poll() is not None:
            return
        self.child.send_signal(signal.SIGTERM)
        try:
            self.child.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            self.child.kill()
            self.child.wait()
            raise AssertionError(f"{self.arguments[0]} did not stop on SIGTERM:\n{self.log()}")

    def log(self, since=0):
        with open(self.log_path, "rb") as log:
            log.seek(since)
            return log.read().decode("utf-8", "replace")


class Relay:
    """A `linkrelay serve` process on a SQLite file of the test's own, with an API key of its own.

    Starts on a free port (`--port 0`); `restart()` stops it with SIGTERM and starts it again on the
    same port and file."""

    def __init__(self, directory, arguments=(), environment=None):
        self.api_key = "browser-" + secrets.token_hex(16)
        self.store = directory / "relay.sqlite"
        self.extra = list(arguments)
        self.environment = environment
        self.log_path = directory / "relay.log"
        self.port = 0
        self.process = None

    def start(self):
        arguments = [
            "serve", "--host", "127.0.0.1", "--port", str(self.port), "--store", f"sqlite:{self.store}",
            "--api-key", self.api_key, "--drain-delay", "0", "--templates", str(ROOT / "templates"),
        ] + self.extra
        self.process = Process(arguments, self.log_path, self.environment)
        found = self.process.start(r"public_url=(http://127\.0\.0\.1:(\d+))\S* .*LinkRelay listening")
        self.base = found.group(1)
        self.port = int(found.group(2))
        return self

    def stop(self):
        if self.process:
            self.process.stop()

    def restart(self):
        self.stop()
        return self.start()

    def url(self, path):
        return self.base + path

    def api(self, method, path, body=None):
        status, _, answer = http(method, self.url(path), body, {"Authorization": f"Bearer {self.api_key}"})
        return status, answer

    def create_session(self, phone=WAITING_USER, **fields):
        status, answer = self.api("POST", "/v1/sessions", dict(fields, phoneNumber=phone))
        assert status == 201, answer
        return answer

    def state(self, session_id):
        status, answer = self.api("GET", f"/v1/sessions/{session_id}")
        assert status == 200, answer
        return answer["state"]

    def newest_link(self, phone=WAITING_USER):
        """The newest Instant Link the embedded sandbox "texted" to `phone`."""
        return newest_link(self.base, phone)

    def log(self):
        return self.process.log() if self.process else ""


class Sandbox:
    """`linkrelay sandbox`: the simulated Prove alone, which keeps its flows while relays restart."""

    credentials = {"PROVE_CLIENT_ID": "sandbox-client", "PROVE_CLIENT_SECRET": "sandbox-secret"}

    def __init__(self, directory):
        self.log_path = directory / "sandbox.log"
        self.process = None

    def start(self):
        # The sandbox's links name its port, so it gets a chosen one rather than 0; another process may
        # take that port first, and then another is tried.
        for _ in range(5):
            port = free_port()
            self.process = Process(["sandbox", "--host", "127.0.0.1", "--port", str(port)], self.log_path)
            try:
                self.process.start(r"listening on 127\.0\.0\.1:\d+")
            except RuntimeError:
                continue
            self.base = f"http://127.0.0.1:{port}"
            return self
        raise RuntimeError("the sandbox did not start:\n" + self.process.log())

    def stop(self):
        if self.process:
            self.process.stop()

    @property
    def prove(self):
        return self.base + "/sandbox/prove"

    def relay_arguments(self):
        return ["--prove", self.prove]

    def newest_link(self, phone=WAITING_USER):
        return newest_link(self.base, phone)


class Integrator:
    """An integrator's web server: `GET /` answers the page the test set with `serve(html)`. Its origin,
    http://127.0.0.2:PORT, is not the relay's, so the page reaches the relay as integrators' pages do:
    cross-origin, by CORS and the relay's --allowed-origin. (Not `localhost`, which a browser may try
    on ::1 first, where another process may listen on the same port.)"""

    def __init__(self):
        self.html = "<!doctype html><title>Nothing yet</title>"
        self.headers = {}
        integrator = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                body = integrator.html.encode()
                self.send_response(200)
                self.send_header("Content-Type", "text/html; charset=utf-8")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                for name, value in integrator.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.2", 0), Handler)
        self.origin = f"http://127.0.0.2:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def serve(self, html, headers=None):
        """Serves `html` (with `headers`) from now on; returns the page's URL."""
        self.html = html
        self.headers = dict(headers or {})
        return self.origin + "/"

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def integrator():
    server = Integrator()
    yield server
    server.stop()


@pytest.fixture
def start_relay(tmp_path):
    """Starts relays (`start_relay(*flags, environment=None)`) and stops each after the test."""
    started = []

    def start(*arguments, environment=None):
        directory = tmp_path / f"relay-{len(started)}"
        directory.mkdir()
        relay = Relay(directory, arguments, environment)
        started.append(relay)
        return relay.start()

    yield start
    for relay in started:
        relay.stop()


@pytest.fixture
def relay(start_relay):
    """A relay on the embedded sandbox (the demo pages are mounted)."""
    return start_relay()


@pytest.fixture
def sandbox(tmp_path):
    process = Sandbox(tmp_path).start()
    yield process
    process.stop()


@pytest.fixture(scope="session")
def browser():
    with sync_playwright() as playwright:
        chromium = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        yield chromium
        chromium.close()


@pytest.fixture
def new_context(browser):
    """Makes browser contexts with Playwright's options (`new_context(http_credentials={...})`); each is
    closed after the test, which fails if a page of one had an uncaught error."""
    made, errors = [], []

    def make(**options):
        context = browser.new_context(**dict({"viewport": {"width": 900, "height": 900}}, **options))
        context.on("weberror", lambda error: errors.append(str(error.error)))
        made.append(context)
        return context

    yield make
    for context in made:
        context.close()
    assert errors == [], f"uncaught errors in the pages: {errors}"


@pytest.fixture
def context(new_context):
    return new_context()


@pytest.fixture
def page(context):
    return context.new_page()


@pytest.fixture(scope="session")
def firefox_browser(tmp_path_factory):
    missing = [what for what, there in [
        (f"{FIREFOX} (apt-get install firefox-esr)", os.access(FIREFOX, os.X_OK)),
        ("the websockets package (pip install websockets)", importlib.util.find_spec("websockets") is not None),
    ] if not there]
    if missing:
        # CI installs both: there a missing one is a failure, not a quiet skip.
        message = "Firefox tests need " + " and ".join(missing)
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    firefox = Firefox(FIREFOX, tmp_path_factory.mktemp("firefox"), DEADLINE)
    try:
        firefox.start()
        yield firefox
    finally:
        firefox.quit()


@pytest.fixture
def firefox(firefox_browser):
    """A Firefox tab of the test's own; the test fails if Firefox reported an error of one of its pages."""
    tab = firefox_browser.new_tab()
    yield tab
    errors = [error for error in firefox_browser.close_tab(tab)
              if not any(expected in error for expected in tab.expected_errors)]
    assert errors == [], f"errors in the pages: {errors}; console errors: {tab.console_errors()}"


@pytest.fixture
def screenshot():
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    def take(page, name):
        path = SCREENSHOTS / f"{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path

    return take


def without(*names):
    """An init script that removes browser APIs (`without("WebSocket")`), so that a page falls back."""
    return "".join(f"delete window.{name};" for name in names)


# An init script that counts what the page asks of the network, in `window.relayRequests` ("fetch URL",
# "WebSocket URL", "EventSource URL"): the client's every attempt, whatever the relay or the browser
# does with it (a refused CORS preflight never reaches a page's or Playwright's request events).
# Added after `without(...)`, it wraps only the APIs the page still has.
COUNT_REQUESTS = """(() => {
  window.relayRequests = [];
  const note = (kind, url) => window.relayRequests.push(kind + " " + String(url && url.url ? url.url : url));
  const originalFetch = window.fetch;
  window.fetch = function (input, init) { note("fetch", input); return originalFetch.call(this, input, init); };
  for (const name of ["WebSocket", "EventSource"]) {
    const Original = window[name];
    if (typeof Original !== "function") continue;
    const Counted = function (url, options) { note(name, url); return new Original(url, options); };
    Counted.prototype = Original.prototype;
    window[name] = Counted;
  }
})();"""

# How long a page that got `onError` is watched for more requests: longer than the client's first two
# back-off delays together (at most 0.5 s and 1 s), so a client that kept retrying would show it.
QUIET_SECONDS = 2


def security_events(relay, event):
    """The relay's count of a security event (`linkrelay_security_events_total{event=...}`), from /metrics."""
    status, _, text = http("GET", relay.url("/metrics"))
    assert status == 200, text
    match = re.search(r'^linkrelay_security_events_total\{event="' + event + r'"\} (\d+)', text, re.MULTILINE)
    return int(match.group(1)) if match else 0


def waiting_page(relay):
    """An integrator's wait page on the browser client, loaded from `relay`. `start(channel, log)` waits
    on the channel and records each handler call in `window[log]` ("event:1:waiting", "tapped:2",
    "result:verified:3", "error:401", "transport:websocket", …); the default log, "calls", is also
    shown on the page: the status, the events as a list, the results shown and the connections made."""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Shop: check your phone</title>
<script src="{relay.base}/v1/client.js"></script>
<style>body {{ font: 16px system-ui, sans-serif; margin: 2rem; }} .verified {{ color: #137333; }}</style>
</head><body>
<h1>Shop checkout: check your phone</h1>
<p id="status">Waiting for the tap</p>
<p>Results shown: <span id="results">0</span>. Connections: <span id="connections"></span></p>
<ol id="events"></ol>
<script>
  "use strict";
  function start(channel, log = "calls") {{
    const calls = (window[log] = []);
    const shown = log === "calls";
    const text = (id, value) => {{ if (shown) document.getElementById(id).textContent = value; }};
    return LinkRelay.wait(channel, {{
      onEvent(event) {{
        calls.push("event:" + event.seq + ":" + event.type);
        if (!shown) return;
        const item = document.createElement("li");
        item.textContent = event.type + (event.outcome ? ": " + event.outcome : "");
        document.getElementById("events").appendChild(item);
      }},
      onTapped(event) {{ calls.push("tapped:" + event.seq); text("status", "Tapped, asking Prove"); }},
      onResult(outcome, event) {{
        calls.push("result:" + outcome + ":" + event.seq);
        text("status", "Result: " + outcome);
        if (shown) document.getElementById("status").className = outcome;
        text("results", String(Number(document.getElementById("results").textContent) + 1));
      }},
      onExpired(event) {{ calls.push("expired:" + event.seq); text("status", "Expired"); }},
      onCancelled(event) {{ calls.push("cancelled:" + event.seq); text("status", "Cancelled"); }},
      onError(error) {{
        calls.push("error:" + error.status);
        window[log + "Error"] = {{
          name: error.name, status: error.status, code: error.code, detail: error.detail, problem: error.problem }};
        text("status", "Error " + error.status);
      }},
      onTransport(name) {{
        calls.push("transport:" + name);
        text("connections", calls.filter((call) => call.startsWith("transport:")).map((call) => call.slice(10)).join(", "));
      }},
    }});
  }}
</script>
</body></html>"""
