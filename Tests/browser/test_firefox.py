"""The demo and /v1/client.js in Firefox (Debian's firefox-esr, headless, over WebDriver BiDi): what
test_demo.py and test_client.py do in Chromium, so that "works in current Chromium and Firefox" is
tested in both. The phone's tap is an HTTP request from the test, as in test_client.py."""

import time

import pytest

from conftest import COUNT_REQUESTS, QUIET_SECONDS, WAITING_USER, security_events, tap, waiting_page, without

TRANSPORTS = [("websocket", ()), ("sse", ("WebSocket",)), ("poll", ("WebSocket", "EventSource"))]


def test_firefox_demo_desktop_waits_phone_taps_desktop_shows_verified(relay, firefox, screenshot):
    firefox.goto(relay.url("/"))
    assert "Firefox/" in firefox.evaluate("navigator.userAgent"), "the browser is Firefox"
    firefox.wait_for_text("h1", "Verify a phone with Instant Link")
    firefox.fill("input[name=phoneNumber]", WAITING_USER)
    firefox.click("button[type=submit]")
    firefox.wait_for_text("h1", "Check your phone")
    firefox.wait_for_text("#status", "Waiting for the tap…")
    firefox.wait_for_text("#transport", "Connected by WebSocket")
    firefox.wait_for(
        "[...document.querySelectorAll('#events li')].map((item) => item.textContent)", "the waiting event",
        lambda items: len(items) == 1 and "waiting at " in items[0])
    screenshot(firefox, "firefox-desktop-waiting")

    tap(relay.newest_link())
    firefox.wait_for_text("#status", "Verified ✓")
    assert firefox.evaluate("document.getElementById('status').classList.contains('verified')")
    items = firefox.wait_for(
        "[...document.querySelectorAll('#events li')].map((item) => item.textContent)", "three events",
        lambda items: len(items) == 3)
    for item, expected in zip(items, ["waiting at ", "tapped at ", "result: verified at "]):
        assert expected in item, items
    path = screenshot(firefox, "firefox-desktop-verified")
    assert path.read_bytes().startswith(b"\x89PNG\r\n\x1a\n") and path.stat().st_size > 1000, path


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=[name for name, _ in TRANSPORTS])
def test_firefox_client_on_an_integrators_page_calls_the_handlers_once_each(
    start_relay, integrator, firefox, screenshot, name, missing
):
    """The page is on the integrator's origin and loads the client from the relay (CORS); the
    transport is forced as in test_client.py, by taking the better ones away from the page."""
    relay = start_relay("--allowed-origin", integrator.origin)
    created = relay.create_session()
    if missing:
        firefox.add_init_script(without(*missing))
    firefox.goto(integrator.serve(waiting_page(relay)))
    firefox.wait_for_text("h1", "Shop checkout: check your phone")
    assert firefox.evaluate("[typeof WebSocket, typeof EventSource]") == [
        "undefined" if api in missing else "function" for api in ("WebSocket", "EventSource")]
    firefox.call("channel => { window.waiting = start(channel); }", created["channel"])
    firefox.wait_for("window.calls", "the waiting event", lambda calls: "event:1:waiting" in calls)
    assert firefox.evaluate("window.waiting.transport") == name

    tap(relay.newest_link())
    firefox.wait_for_text("#status", "Result: verified")
    assert firefox.evaluate("window.calls") == [
        f"transport:{name}", "event:1:waiting", "event:2:tapped", "tapped:2", "event:3:result",
        "result:verified:3",
    ]
    assert firefox.evaluate("document.getElementById('results').textContent") == "1"
    # Stopped after the terminal event: nothing is open any more.
    assert firefox.evaluate("window.waiting.transport") is None
    assert relay.state(created["sessionId"]) == "verified"
    if name == "websocket":
        screenshot(firefox, "firefox-client-verified")


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=[name for name, _ in TRANSPORTS])
@pytest.mark.parametrize("fault, status", [("origin", 403), ("token", 404)])
def test_firefox_a_refusal_reaches_onError_once_and_the_client_stops_asking(
    start_relay, integrator, firefox, name, missing, fault, status
):
    """As test_client.py's: a page on an origin the relay does not allow, or with a wrong token, gets
    `onError({status, code, detail})` once, and then asks the relay nothing more."""
    relay = start_relay() if fault == "origin" else start_relay("--allowed-origin", integrator.origin)
    channel = dict(relay.create_session()["channel"])
    if fault == "token":
        channel["token"] = "not-the-token"
    # Firefox reports each refused connection as a page error: the WebSocket's or the event stream's,
    # and the long-poll's refused CORS preflight. They are what is tested here; the page's requests are
    # counted below.
    firefox.expected_errors += ["can’t establish a connection to the server at", "Cross-Origin Request Blocked"]
    if missing:
        firefox.add_init_script(without(*missing))
    firefox.add_init_script(COUNT_REQUESTS)
    firefox.goto(integrator.serve(waiting_page(relay)))
    firefox.wait_for_text("h1", "Shop checkout: check your phone")
    firefox.call("channel => { window.waiting = start(channel); }", channel)
    firefox.wait_for_text("#status", f"Error {status}")
    refused = security_events(relay, "channel_origin_refused")
    asked = firefox.evaluate("window.relayRequests")

    time.sleep(QUIET_SECONDS)
    assert firefox.evaluate("window.calls") == [f"error:{status}"]
    error = firefox.evaluate("window.callsError")
    assert error["name"] == "LinkRelayError" and error["status"] == status, error
    assert error.get("code") == ("origin_not_allowed" if fault == "origin" else "session_not_found"), error
    expected = "This origin may not open channels." if fault == "origin" else "No session with this id."
    assert error["detail"] == expected, error
    assert firefox.evaluate("window.waiting.transport") is None
    assert firefox.evaluate("window.relayRequests") == asked, "no request after onError"
    assert 1 <= len(asked) <= 3, asked
    if fault == "origin":
        assert refused >= 1
        assert security_events(relay, "channel_origin_refused") == refused, "the relay heard nothing more"
