"""The demo's Nevis tab, as a person uses it: the desktop page starts an approval and shows its QR code,
the phone scans it (zbarimg reads the code from the page's image) and approves in the sandbox's Access
App, and the desktop page shows the result with the user Nevis named. And a push, denied from the
Access App the wait page links."""

import base64
import re
import subprocess

from playwright.sync_api import expect

from conftest import SCREENSHOTS

MESSAGE = "Pay CHF 12.00 to Example Shop?"


def start(desktop, relay, channel="QR code and link", message=MESSAGE):
    """The desktop person's part: the Nevis tab, dave (the default), a message, the channel, start."""
    desktop.goto(relay.url("/"))
    desktop.get_by_role("link", name="Nevis").click()
    expect(desktop.get_by_role("heading")).to_have_text("Approve with the Nevis Access App")
    expect(desktop.get_by_role("combobox", name=re.compile(r"^User"))).to_have_value("dave")
    desktop.get_by_label("Message the app shows (optional)").fill(message)
    desktop.get_by_label(channel).check()
    desktop.get_by_role("button", name="Start the approval").click()
    expect(desktop.get_by_role("heading")).to_have_text("Approve in the Access App")
    expect(desktop.locator("#status")).to_have_text("Waiting for the approval…")
    expect(desktop.locator("#transport")).to_have_text("Connected by WebSocket")


def scan(image, directory):
    """What a phone's camera reads from the QR code: the image's bytes, from its data: URI, decoded by
    zbarimg."""
    source = image.get_attribute("src")
    assert source.startswith("data:image/png;base64,"), source[:40]
    path = directory / "qr.png"
    path.write_bytes(base64.b64decode(source.split(",", 1)[1]))
    read = subprocess.run(["zbarimg", "--quiet", "--raw", str(path)], capture_output=True, text=True, check=True)
    return read.stdout.strip()


def test_nevis_desktop_shows_the_qr_code_phone_scans_and_approves_desktop_shows_verified(
        relay, context, new_context, screenshot, tmp_path):
    desktop = context.new_page()
    desktop.goto(relay.url("/?flow=nevis"))
    screenshot(desktop, "nevis-home")
    start(desktop, relay)
    qr = desktop.get_by_role("img", name="QR code for the Nevis Access App")
    expect(qr).to_be_visible()
    # The page's CSP lets the data: image load: it has its pixels.
    assert desktop.evaluate("document.getElementById('qr').naturalWidth") > 0
    screenshot(desktop, "nevis-waiting")

    link = scan(qr, tmp_path)
    assert link == desktop.get_by_role("link", name="Open on this phone").get_attribute("href"), link
    assert link.startswith(relay.url("/sandbox/nevis/open?dispatchTokenResponse=")), link

    phone = context.new_page()
    phone.goto(link)
    expect(phone.get_by_role("heading")).to_have_text("Confirm")
    expect(phone.get_by_text(MESSAGE)).to_be_visible()
    screenshot(phone, "nevis-app")
    phone.get_by_role("button", name="Approve").click()
    expect(phone.get_by_role("heading")).to_have_text("Approved")

    # The result, with the user Nevis named, from the demo's own result page.
    expect(desktop.get_by_role("heading")).to_have_text("Approved")
    expect(desktop.locator("#outcome")).to_have_text("Verified ✓")
    expect(desktop.locator("#outcome")).to_have_class(re.compile(r"\bverified\b"))
    expect(desktop.locator("#nevis-username")).to_have_text("dave")
    screenshot(desktop, "nevis-verified")

    # What the app was given stays out of the relay's log.
    payload = link.split("dispatchTokenResponse=", 1)[1]
    for secret in (link, payload, MESSAGE):
        assert secret not in relay.log(), f"the relay's log contains {secret[:24]}…"

    # The operators' page counts the approval and the status questions, and shows none of it.
    ops = new_context(http_credentials={"username": "ops", "password": relay.api_key},
                      viewport={"width": 1100, "height": 900}).new_page()
    ops.goto(relay.url("/ops"))
    section = ops.locator("#nevis")
    expect(section.get_by_role("heading", name=re.compile("^Nevis"))).to_be_visible()
    expect(section.locator("td").first).to_have_text("approval")
    expect(section.locator("tr", has_text="status").locator("td").nth(4)).to_have_text("0")  # no error
    expect(ops.locator("#status-nevis")).to_have_attribute("data-level", "ok")
    assert link not in ops.content() and MESSAGE not in ops.content()
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    section.screenshot(path=str(SCREENSHOTS / "nevis-ops.png"))


def test_nevis_push_denied_in_the_access_app_the_wait_page_links(relay, context, screenshot):
    desktop = context.new_page()
    start(desktop, relay, channel="Push to the user's app", message="")
    expect(desktop.get_by_role("img")).to_have_count(0)
    expect(desktop.locator("#instructions")).to_contain_text("Nevis sent the request to dave's Access App.")

    # The phone: the push waits in dave's app, one click away in a new tab.
    with context.expect_page() as opened:
        desktop.get_by_role("link", name="Open the sandbox Access App").click()
    phone = opened.value
    expect(phone.get_by_role("heading")).to_have_text("dave’s Access App")
    screenshot(phone, "nevis-app-push")
    phone.get_by_role("button", name="Deny").click()
    expect(phone.get_by_role("heading")).to_have_text("Denied")

    expect(desktop.get_by_role("heading")).to_have_text("Not approved")
    expect(desktop.locator("#outcome")).to_have_text("Not verified")
    expect(desktop.locator("#outcome")).to_have_class(re.compile(r"\bfailed\b"))
    expect(desktop.locator("#nevis-username")).to_have_text("dave")
    screenshot(desktop, "nevis-denied")
