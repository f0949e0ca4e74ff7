"""The demo's Pre-Fill tab, as a person uses it: the desktop page waits, the sandbox phone taps, the
desktop page asks for the date of birth the start lacked, shows the person Prove found (Marcia Longo),
and the person confirms."""

import re

from playwright.sync_api import expect

MARCIA = "2001001693"


def test_prefill_desktop_waits_phone_taps_desktop_confirms_the_person(relay, context, screenshot):
    desktop = context.new_page()
    desktop.goto(relay.url("/"))
    desktop.get_by_role("link", name="Pre-Fill").click()
    expect(desktop.get_by_role("heading")).to_have_text("Pre-fill a sign-up with Instant Link")
    expect(desktop.get_by_label("Phone number")).to_have_value(MARCIA)
    screenshot(desktop, "prefill-home")
    desktop.get_by_role("button", name="Send the link").click()
    expect(desktop.get_by_role("heading")).to_have_text("Check your phone")
    expect(desktop.locator("#status")).to_have_text("Waiting for the tap…")
    expect(desktop.locator("#transport")).to_have_text("Connected by WebSocket")
    session_id = desktop.locator("#session").get_attribute("data-session")
    # Nothing to go on with before the phone has acted.
    expect(desktop.locator("#prefill-next")).to_be_hidden()
    expect(desktop.get_by_role("button", name=re.compile("Continue"))).to_have_count(0)
    screenshot(desktop, "prefill-waiting")

    with context.expect_page() as opened:
        desktop.get_by_role("link", name="Open the sandbox phone").click()
    phone = opened.value
    expect(phone.get_by_role("heading")).to_have_text(f"Sandbox phone {MARCIA}")
    phone.get_by_role("link", name="Tap the link").first.click()
    expect(phone.get_by_role("heading")).to_have_text("Thanks, we got your tap")

    # On `verified` the wait page goes on to the demo's own form: the start had no dob or SSN.
    expect(desktop.get_by_role("heading")).to_have_text("Confirm it's you")
    desktop.get_by_label("Date of birth").fill("1982-07-19")
    desktop.get_by_role("button", name="Continue").click()

    expect(desktop.get_by_role("heading")).to_have_text("Check your details")
    expected = {"First name": "Marcia", "Last name": "Longo", "Date of birth": "1982-07-19",
                "Address": "00 Mallard Park", "City": "New Orleans", "State": "LA", "ZIP code": "70165"}
    for label, value in expected.items():
        expect(desktop.get_by_label(label, exact=True)).to_have_value(value)
    screenshot(desktop, "prefill-details")

    desktop.get_by_role("button", name="Confirm").click()
    expect(desktop.get_by_role("heading")).to_have_text("Your details are confirmed")
    expect(desktop.locator("#outcome")).to_have_text("Verified ✓")
    expect(desktop.locator("#outcome")).to_have_class(re.compile(r"\bverified\b"))
    screenshot(desktop, "prefill-verified")

    # The backend's view agrees, and the relay's log names nobody.
    status, session = relay.api("GET", f"/v1/sessions/{session_id}")
    assert status == 200 and session["prefill"]["completed"] is True, session
    for secret in ("Marcia", "Longo", "1982-07-19", "Mallard"):
        assert secret not in relay.log(), f"the relay's log contains {secret}"
