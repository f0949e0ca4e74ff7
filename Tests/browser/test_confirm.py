"""Confirm mode (`--confirm-on-phone`) in real browsers: the phone's own "Yes, it's me" counts as the tap.

The confirm page has `Referrer-Policy: no-referrer`, under which Chromium and Firefox send its form's
POST with `Origin: null` (and `Sec-Fetch-Site: same-origin`): the relay must take that as its own page,
and still refuse a `null` from another site (a sandboxed frame), which the Swift tests send by hand."""

from playwright.sync_api import expect

from conftest import DEADLINE, http, wait_until


def landing_url(relay):
    """Where Prove's Instant Link page sends the phone, the tap done at Prove (without following it)."""
    status, headers, body = http("GET", relay.newest_link())
    assert status == 302, body
    return headers["Location"]


def test_chromium_confirm_page_counts_its_own_post(start_relay, page, screenshot):
    relay = start_relay("--confirm-on-phone", "--integrator-name", "Acme Bank")
    session = relay.create_session()
    page.goto(landing_url(relay))
    expect(page.get_by_role("heading")).to_have_text("Is this you?")
    assert relay.state(session["sessionId"]) == "waiting", "the page alone changes nothing"
    screenshot(page, "confirm")
    page.get_by_role("button", name="Yes, it's me").click()
    wait_until(lambda: relay.state(session["sessionId"]) == "verified", "the session verified", DEADLINE)
    expect(page.get_by_role("heading")).not_to_have_text("Not allowed")
    screenshot(page, "confirm-done")


def test_firefox_confirm_page_counts_its_own_post(start_relay, firefox):
    relay = start_relay("--confirm-on-phone")
    session = relay.create_session()
    firefox.goto(landing_url(relay))
    firefox.wait_for_text("h1", "Is this you?")
    firefox.click("button[value=confirm]")
    wait_until(lambda: relay.state(session["sessionId"]) == "verified", "the session verified", DEADLINE)
