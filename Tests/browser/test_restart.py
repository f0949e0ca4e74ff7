"""Across a relay restart: the desktop waits, the relay is stopped (SIGTERM) and started again on the
same SQLite file and port, the phone taps, and the page, which reconnected by itself, shows the
outcome once.

For a tap after the restart, Prove is a `linkrelay sandbox` process of its own, as Prove is in
production: the embedded sandbox keeps its flows in the relay's memory, so after a restart of that
relay the link has no flow to complete. The demo pages are mounted only with the embedded sandbox, so
the tap test's desktop is an integrator's page on the same client the demo uses; the demo page itself
is tested across a restart with the outcome that needs no flow, the backend's cancel."""

import re

import pytest
from playwright.sync_api import expect

from conftest import WAITING_USER, Sandbox, waiting_page, without

TRANSPORTS = [("websocket", ()), ("sse", ("WebSocket",)), ("poll", ("WebSocket", "EventSource"))]


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=[name for name, _ in TRANSPORTS])
def test_page_reconnects_after_a_restart_and_shows_the_outcome_once(
    start_relay, sandbox, integrator, context, screenshot, name, missing
):
    relay = start_relay(
        "--allowed-origin", integrator.origin, *sandbox.relay_arguments(), environment=Sandbox.credentials)
    created = relay.create_session()
    desktop = context.new_page()
    if missing:
        desktop.add_init_script(without(*missing))
    desktop.goto(integrator.serve(waiting_page(relay)))
    desktop.evaluate("channel => { window.waiting = start(channel); }", created["channel"])
    expect(desktop.locator("#connections")).to_have_text(name)
    expect(desktop.locator("#events li")).to_have_text(["waiting"])
    if name == "websocket":
        screenshot(desktop, "restart-desktop-waiting")

    relay.stop()
    assert "Drained" in relay.process.log(), "the relay stopped gracefully"
    # While the relay is down, the page tries again and fails (a WebSocket or an event stream that
    # does not open asks the long-poll endpoint why, and that cannot connect either).
    with desktop.expect_event("requestfailed", predicate=lambda request: "/poll?" in request.url):
        pass
    relay.start()
    # The page connects again by itself, on the transport it had, before anything happens.
    expect(desktop.locator("#connections")).to_have_text(re.compile(rf"^{name}(, {name})+$"))

    phone = context.new_page()
    phone.goto(sandbox.newest_link())
    expect(phone.get_by_role("heading")).to_have_text("Thanks, we got your tap")

    expect(desktop.locator("#status")).to_have_text("Result: verified")
    expect(desktop.locator("#events li")).to_have_text(["waiting", "tapped", "result: verified"])
    expect(desktop.locator("#results")).to_have_text("1")
    calls = desktop.evaluate("window.calls")
    assert [call for call in calls if not call.startswith("transport:")] == [
        "event:1:waiting", "event:2:tapped", "tapped:2", "event:3:result", "result:verified:3"]
    assert relay.state(created["sessionId"]) == "verified"
    if name == "websocket":
        screenshot(desktop, "restart-desktop-verified")


def test_demo_page_reconnects_after_a_restart_and_shows_the_outcome_once(relay, context, screenshot):
    desktop = context.new_page()
    desktop.goto(relay.url("/"))
    desktop.get_by_label("Phone number").fill(WAITING_USER)
    desktop.get_by_role("button", name="Send the link").click()
    expect(desktop.locator("#transport")).to_have_text("Connected by WebSocket")
    expect(desktop.locator("#events li")).to_have_count(1)
    session_id = desktop.locator("#session").get_attribute("data-session")

    relay.restart()
    status, answer = relay.api("POST", f"/v1/sessions/{session_id}/cancel")
    assert status == 200, answer

    expect(desktop.locator("#status")).to_have_text("Cancelled")
    items = desktop.locator("#events li")
    expect(items).to_have_count(2)
    expect(items).to_contain_text(["waiting at ", "cancelled at "])
    screenshot(desktop, "restart-demo-cancelled")
