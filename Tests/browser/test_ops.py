"""The operators' page in a real browser (Debian's chromium, headless, driven by Playwright).

Self-contained for now: it starts `.build/debug/linkrelay` itself on a free port, with a throw-away
SQLite file and a known API key, makes a verified session through the API and the embedded sandbox,
then opens /ops with Basic credentials and checks that the charts render, that the counts show the
session, and that the page refreshes itself in place. A screenshot goes to .build/screenshots/ops.png.
The second test (on conftest's relays) opens the breaker with the sandbox's fault injection and reads
the status strip; its screenshot is .build/screenshots/ops-breaker-open.png.
"""

import base64
import json
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from playwright.sync_api import expect

ROOT = Path(__file__).resolve().parents[2]
BINARY = ROOT / ".build" / "debug" / "linkrelay"
SCREENSHOTS = ROOT / ".build" / "screenshots"
API_KEY = "ops-browser-key-0123456789abcdef"
PHONE = "2001004014"  # Prove's sandbox user that passes the desktop Instant Link


class NoRedirect(urllib.request.HTTPRedirectHandler):
    """The phone's browser follows Prove's 302 itself; here it is read, not followed."""

    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def call(method, url, body=None, headers=None):
    """One HTTP request; returns (status, headers, body text), 4xx/5xx included."""
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    if data is not None:
        request.add_header("Content-Type", "application/json")
    try:
        with OPENER.open(request, timeout=10) as answer:
            return answer.status, answer.headers, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.headers, error.read().decode()


def until(condition, what, seconds=20):
    """Polls `condition` until it returns something true, or fails after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}")


def free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def relay():
    """A relay on the embedded sandbox, its base URL yielded; stopped with SIGTERM afterwards."""
    assert BINARY.exists(), "build first: swift build"
    with tempfile.TemporaryDirectory() as directory:
        for _ in range(5):  # the free port may be taken before the relay binds it
            port = free_port()
            log = open(os.path.join(directory, "relay.log"), "w+")
            process = subprocess.Popen(
                [str(BINARY), "serve", "--port", str(port), "--api-key", API_KEY, "--drain-delay", "0",
                 "--store", "sqlite:" + os.path.join(directory, "relay.sqlite")],
                cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)
            base = f"http://127.0.0.1:{port}"

            def ready():
                if process.poll() is not None:
                    return "exited"
                try:
                    return call("GET", base + "/readyz")[0] == 200 and "ready"
                except OSError:
                    return False

            if until(ready, "the relay to be ready") == "ready":
                break
            log.seek(0)
            print(log.read())
        else:
            pytest.fail("the relay did not start")
        try:
            yield base
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=30)
            log.close()


def verified_session(base):
    """Creates a session, taps its Instant Link as the phone would, and waits for `verified`."""
    auth = {"Authorization": "Bearer " + API_KEY}
    status, _, body = call("POST", base + "/v1/sessions", {"phoneNumber": PHONE}, auth)
    assert status == 201, body
    session = json.loads(body)
    _, _, outbox = call("GET", f"{base}/sandbox/outbox?phoneNumber={PHONE}")
    link = json.loads(outbox)["messages"][-1]["link"]
    status, headers, _ = call("GET", link)  # Prove's page: possession done, 302 to the relay
    assert status == 302
    status, _, _ = call("GET", headers["Location"])  # the landing
    assert status == 200

    def verified():
        _, _, body = call("GET", f"{base}/v1/sessions/{session['sessionId']}", headers=auth)
        return json.loads(body)["state"] == "verified"

    until(verified, "the session to be verified")
    return session


def waiting_session_with_channel(base):
    """Creates a session that stays waiting, with a desktop's SSE channel open on it; returns both."""
    status, _, body = call("POST", base + "/v1/sessions", {"phoneNumber": PHONE}, {"Authorization": "Bearer " + API_KEY})
    assert status == 201, body
    session = json.loads(body)
    channel = urllib.request.urlopen(session["channel"]["events"] + "?token=" + session["channel"]["token"], timeout=10)
    assert channel.status == 200
    return session, channel


def figure(page, section, label):
    """The value of a figure on the page, e.g. ("activity", "Verified") -> "1"."""
    return page.locator(f"#{section} .figure").filter(has=page.locator("dt", has_text=re.compile(f"^{re.escape(label)}$"))) \
        .locator("dd")


def test_ops_page_renders_counts_and_refreshes_in_place(relay, browser):
    """`browser`: the harness's one Chromium (conftest.py); the relay is this file's own, by base URL."""
    first = verified_session(relay)
    waiting, channel = waiting_session_with_channel(relay)
    # Without credentials: the Basic challenge (a headless browser without credentials to offer aborts
    # the navigation instead of showing it, so this one is read over plain HTTP).
    status, headers, body = call("GET", relay + "/ops")
    assert status == 401 and "<svg" not in body
    assert headers["WWW-Authenticate"].startswith('Basic realm="LinkRelay ops"')
    try:
        context = browser.new_context(
            http_credentials={"username": "ops", "password": API_KEY}, viewport={"width": 1100, "height": 900})
        page = context.new_page()
        problems = []
        # Chromium asks every site for /favicon.ico too: the relay has one, so any console error is the page's.
        page.on("console", lambda message: message.type in ("error", "warning") and problems.append(message.text))
        page.on("pageerror", lambda error: problems.append(str(error)))
        answer = page.goto(relay + "/ops?refresh=2")
        assert answer.status == 200
        assert answer.headers["cache-control"] == "no-store"
        assert "default-src 'none'" in answer.headers["content-security-policy"]

        # The status strip first, all green; webhooks are off.
        for box in ["store", "breaker", "prove-errors", "nevis", "answers", "drain"]:
            expect(page.locator(f"#status-{box}")).to_have_attribute("data-level", "ok")
        expect(page.locator("#status-webhooks")).to_have_attribute("data-level", "off")
        # Every section, its charts drawn as SVG with bars in them.
        for section in ["channels", "sessions", "activity", "prove", "breaker", "nevis", "answers", "webhooks"]:
            expect(page.locator(f"#{section} h2")).to_be_visible()
        charts = page.locator("figure.chart svg")
        # channels, holds by age, taps, outcomes, Prove, breaker refusals, Nevis's calls, status questions
        # and open operations (the embedded sandbox is Nevis too), answers (webhooks are off)
        assert charts.count() == 10
        for index in range(charts.count()):
            box = charts.nth(index).bounding_box()
            assert box and box["width"] > 300 and box["height"] > 50, f"chart {index} is drawn"
        # The outcomes chart has a green (verified) bar; the Prove table lists unify.
        outcomes = page.locator('#activity svg[aria-label^="Outcomes"]')
        assert outcomes.locator('rect[fill="#15803d"]').count() >= 2  # the bar and the legend's swatch
        expect(figure(page, "activity", "Verified")).to_have_text("1")
        expect(figure(page, "activity", "Taps")).to_have_text("1")
        expect(figure(page, "breaker", "State")).to_have_text("closed")
        expect(figure(page, "channels", "SSE")).to_have_text("1")
        expect(figure(page, "sessions", "Waiting")).to_have_text("1")
        assert page.locator("#sessions svg title", has_text="0–30 s: waiting 1, tapped 0").count() == 1
        expect(page.locator("#prove td").first).to_have_text("unify")
        # Aggregates only: nothing of the session is on the page.
        html = page.content()
        for secret in [first["sessionId"], first["channel"]["token"], waiting["sessionId"], API_KEY, PHONE]:
            assert secret not in html

        # Refreshed in place: a marker set on this document survives while the figures change.
        page.evaluate("window.notReloaded = true")
        verified_session(relay)
        expect(figure(page, "activity", "Verified")).to_have_text("2", timeout=15000)
        expect(figure(page, "activity", "Taps")).to_have_text("2")
        assert page.evaluate("window.notReloaded === true"), "the page was reloaded, not refreshed in place"
        expect(page.locator("#refresh-status")).to_have_text("")

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / "ops.png"), full_page=True)
        assert not problems, f"console errors or CSP refusals: {problems}"
        context.close()
    finally:
        channel.close()


def test_ops_status_strip_with_the_breaker_open(start_relay, new_context, screenshot):
    """Prove failing (the sandbox's fault injection: every unify answers 503) opens the breaker after two
    creates; the third is refused at once. The first screen of /ops says so in red: the breaker's box,
    Prove's error rate, and the 503s. Screenshot: .build/screenshots/ops-breaker-open.png."""
    relay = start_relay("--sandbox-fault", "unify:error=1,status=503", "--breaker-failures", "2",
                        "--breaker-cooldown", "600", "--limits", "off")
    for _ in range(3):
        status, answer = relay.api("POST", "/v1/sessions", {"phoneNumber": PHONE})
        assert status == 503, answer
    context = new_context(http_credentials={"username": "ops", "password": relay.api_key},
                          viewport={"width": 1100, "height": 900})
    page = context.new_page()
    assert page.goto(relay.url("/ops")).status == 200

    breaker = page.locator("#status-breaker")
    expect(breaker).to_have_attribute("data-level", "bad")
    expect(breaker.locator(".status-value")).to_have_text("open")
    expect(breaker.locator(".status-detail")).to_contain_text("1 call refused at once (503)")
    # Red as a person sees it: the box's border and its word in the page's "bad" colour, on the first screen.
    red = "rgb(185, 28, 28)"
    assert breaker.evaluate("(box) => getComputedStyle(box).borderLeftColor") == red
    assert breaker.locator(".status-value").evaluate("(value) => getComputedStyle(value).color") == red
    box = breaker.bounding_box()
    assert box and box["y"] + box["height"] <= 900, f"the breaker's box is below the first screen: {box}"

    prove = page.locator("#status-prove-errors")
    expect(prove).to_have_attribute("data-level", "bad")
    expect(prove.locator(".status-value")).to_have_text("100.0 %")
    expect(page.locator("#status-store")).to_have_attribute("data-level", "ok")
    expect(page.locator("#status-drain")).to_have_attribute("data-level", "ok")
    # Below: the breaker's section says open (no "failures in a row" while open), the error rate cell is
    # highlighted, and the 503s are counted.
    expect(figure(page, "breaker", "State")).to_have_text("open")
    expect(figure(page, "breaker", "Refused (503), last hour")).to_have_text("1")
    expect(page.locator("#breaker dt", has_text="Failures in a row")).to_have_count(0)
    expect(page.locator("#prove td.bad").first).to_have_text("100.0 %")
    assert int(figure(page, "answers", "503").inner_text()) >= 3
    screenshot(page, "ops-breaker-open")
