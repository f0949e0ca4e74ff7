"""The demo, as a person uses it: the desktop page waits, the sandbox phone taps, the desktop shows the
outcome. Once on each transport: the page's WebSocket, then without WebSocket (Server-Sent Events),
then without EventSource either (long-poll)."""

import re

import pytest
from playwright.sync_api import expect

from conftest import WAITING_USER, without

TRANSPORTS = [
    # (name in screenshots, APIs the page lacks, what the page says it is connected by)
    ("websocket", (), "WebSocket"),
    ("sse", ("WebSocket",), "Server-Sent Events"),
    ("long-poll", ("WebSocket", "EventSource"), "long-poll"),
]


def start_waiting(page, relay):
    """The desktop person's part: open the demo, type the number, send the link."""
    page.goto(relay.url("/"))
    expect(page.get_by_role("heading")).to_have_text("Verify a phone with Instant Link")
    page.get_by_label("Phone number").fill(WAITING_USER)
    page.get_by_role("button", name="Send the link").click()
    expect(page.get_by_role("heading")).to_have_text("Check your phone")
    expect(page.locator("#status")).to_have_text("Waiting for the tap…")
    # The number as the sandbox phone's messages show it: all but the last four digits hidden.
    expect(page.locator("#phone")).to_have_text("******" + WAITING_USER[-4:])


# What the wait page asks of the person while the session waits; once it has ended, none of it is shown.
WAITING_ONLY = ["#instructions", "#countdown", "#resend", "#finish", "#change"]


def expect_ended(page, heading):
    """The session has ended on the page: its heading says how, and nothing asks for a tap any more."""
    expect(page.get_by_role("heading")).to_have_text(heading)
    for selector in WAITING_ONLY:
        expect(page.locator(selector)).to_be_hidden()
    assert "Tap it to continue" not in page.locator("main").inner_text()


@pytest.mark.parametrize("name, missing, connected_by", TRANSPORTS, ids=[t[0] for t in TRANSPORTS])
def test_desktop_waits_phone_taps_desktop_shows_verified(relay, context, screenshot, name, missing, connected_by):
    if missing:
        context.add_init_script(without(*missing))
    desktop = context.new_page()
    sockets, streams = [], []
    desktop.on("websocket", lambda socket: sockets.append(socket.url))
    desktop.on("request", lambda request: streams.append(request.url) if "/events?" in request.url else None)

    start_waiting(desktop, relay)
    expect(desktop.locator("#transport")).to_have_text("Connected by " + connected_by)
    expect(desktop.locator("#events li")).to_have_count(1)
    expect(desktop.locator("#events li").first).to_contain_text("waiting at ")
    expect(desktop.locator("#countdown")).to_have_text(re.compile(r"^\d+ s$"))
    screenshot(desktop, f"desktop-waiting-{name}" if missing else "desktop-waiting")

    # The phone: the wait page links the sandbox phone's inbox, which opens in a new tab.
    with context.expect_page() as opened:
        desktop.get_by_role("link", name="Open the sandbox phone").click()
    phone = opened.value
    expect(phone.get_by_role("heading")).to_have_text(f"Sandbox phone {WAITING_USER}")
    if not missing:
        screenshot(phone, "phone")
    phone.get_by_role("link", name="Tap the link").first.click()
    expect(phone.get_by_role("heading")).to_have_text("Thanks, we got your tap")
    if not missing:
        screenshot(phone, "phone-landed")

    expect(desktop.locator("#status")).to_have_text("Verified ✓")
    expect(desktop.locator("#status")).to_have_class(re.compile(r"\bverified\b"))
    expect_ended(desktop, "Phone verified")
    items = desktop.locator("#events li")
    expect(items).to_have_count(3)
    expect(items).to_contain_text(["waiting at ", "tapped at ", "result: verified at "])
    screenshot(desktop, f"desktop-verified-{name}" if missing else "desktop-verified")

    # What carried the events, seen from outside the page's script.
    if name == "websocket":
        assert sockets and all("/ws?" in url for url in sockets), sockets
    else:
        assert sockets == [], "the page had no WebSocket, yet one was opened"
    if name == "long-poll":
        assert streams == [], "the page had no EventSource, yet an event stream was requested"
    elif name == "sse":
        assert streams, "no event stream was requested"


def test_finish_button_reports_what_the_relay_answered(relay, context):
    """The demo's finish button ("I finished on this device", AuthFinish in its hint) calls the finish
    hook through the client (202 while waiting)."""
    desktop = context.new_page()
    start_waiting(desktop, relay)
    finish = desktop.get_by_role("button", name="I finished on this device")
    expect(finish).to_have_accessible_description(re.compile(r"Prove's Web SDK reporting AuthFinish"))
    finish.click()
    expect(desktop.locator("#sdk-note")).to_have_text("Finish: done")
    expect(desktop.locator("#status")).to_have_text("Waiting for the tap…")


def test_after_a_decline_the_page_stops_asking_for_the_tap(relay, context, screenshot):
    """The phone turns the link down: the page says so and offers no resend, finish or other number."""
    desktop = context.new_page()
    start_waiting(desktop, relay)
    phone = context.new_page()
    phone.goto(relay.url(f"/sandbox/phone?phoneNumber={WAITING_USER}"))
    phone.get_by_role("link", name="Decline").first.click()
    expect(desktop.locator("#status")).to_have_text("Not verified")
    expect_ended(desktop, "Not verified")
    screenshot(desktop, "desktop-declined")


def test_number_inputs_are_styled(relay, context):
    """The phone number fields are proper inputs: the page's border, padding and a readable size."""
    desktop = context.new_page()
    start_waiting(desktop, relay)
    field = desktop.get_by_label("Use another number")
    expect(field).to_have_attribute("type", "tel")
    style = field.evaluate("""(input) => {
        const style = getComputedStyle(input);
        return { border: style.borderTopWidth, radius: style.borderTopLeftRadius, padding: style.paddingLeft,
                 height: input.getBoundingClientRect().height };
    }""")
    assert style["border"] == "1px" and style["radius"] == "8px", style
    assert float(style["padding"].rstrip("px")) >= 10 and style["height"] >= 36, style


def test_resend_and_another_number(relay, context):
    """The demo's stand-ins for the SDK's resend and number change still work on the new page."""
    desktop = context.new_page()
    start_waiting(desktop, relay)
    desktop.get_by_role("button", name="Resend the link").click()
    expect(desktop.locator("#sdk-note")).to_have_text("Resend: done")
    desktop.get_by_label("Use another number").fill("2001004017")
    desktop.get_by_role("button", name="Send there").click()
    expect(desktop.locator("#sdk-note")).to_have_text("Another number: done")
    expect(desktop.locator("#phone")).to_have_text("******4017")
    expect(desktop.get_by_role("link", name="Open the sandbox phone")).to_have_attribute(
        "href", "/sandbox/phone?phoneNumber=2001004017")


def test_after_the_hold_ends_the_page_says_the_link_expired(start_relay, context):
    """The hold runs out without a tap: the countdown goes, and so does everything that asks for one."""
    relay = start_relay("--hold", "4")
    desktop = context.new_page()
    start_waiting(desktop, relay)
    expect(desktop.locator("#status")).to_have_text("The link expired before it was tapped")
    expect_ended(desktop, "Link expired")
