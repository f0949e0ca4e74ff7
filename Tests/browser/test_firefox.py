"""The demo and /v1/client.js in Firefox (Debian's firefox-esr, headless, over WebDriver BiDi): what
test_demo.py and test_client.py do in Chromium, so that "works in current Chromium and Firefox" is
tested in both. The phone's tap is an HTTP request from the test, as in test_client.py."""

import pytest

from conftest import WAITING_USER, tap, waiting_page, without

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
