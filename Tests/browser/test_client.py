"""/v1/client.js on an integrator's page: the page is on an origin of its own, loads the client from the
relay, and waits on a channel that the test (the integrator's backend) created through the API."""

import pytest
from playwright.sync_api import expect

import time

from conftest import COUNT_REQUESTS, QUIET_SECONDS, security_events, tap, waiting_page, without

TRANSPORTS = [("websocket", ()), ("sse", ("WebSocket",)), ("poll", ("WebSocket", "EventSource"))]
IDS = [name for name, _ in TRANSPORTS]


@pytest.fixture
def shop(start_relay, integrator, context):
    """A relay that allows the integrator's origin, and a page of that origin with the client loaded."""
    relay = start_relay("--allowed-origin", integrator.origin)
    page = context.new_page()

    def open_page(missing=()):
        if missing:
            page.add_init_script(without(*missing))
        page.goto(integrator.serve(waiting_page(relay)))
        expect(page.get_by_role("heading")).to_contain_text("Shop checkout")
        return page

    return relay, open_page


def calls(page, log="calls"):
    return page.evaluate(f"window[{log!r}]")


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=IDS)
def test_wait_calls_the_handlers_in_order_once_each(shop, name, missing, screenshot):
    relay, open_page = shop
    created = relay.create_session()
    page = open_page(missing)
    page.evaluate("channel => { window.waiting = start(channel); }", created["channel"])
    page.wait_for_function("window.calls.includes('event:1:waiting')")
    assert page.evaluate("window.waiting.transport") == name

    tap(relay.newest_link())
    expect(page.locator("#status")).to_have_text("Result: verified")
    assert calls(page) == [
        f"transport:{name}", "event:1:waiting", "event:2:tapped", "tapped:2", "event:3:result",
        "result:verified:3",
    ]
    # Stopped after the terminal event: nothing is open any more.
    assert page.evaluate("window.waiting.transport") is None
    if name == "websocket":
        screenshot(page, "client-verified")


def test_a_websocket_that_cannot_open_falls_back_to_server_sent_events(start_relay, integrator, context):
    """The browser has WebSocket, but the page's own CSP lets it reach the relay only over http: the
    socket never opens, the client asks the long-poll endpoint why, learns that the relay answers, and
    waits with Server-Sent Events instead."""
    relay = start_relay("--allowed-origin", integrator.origin)
    created = relay.create_session()
    page = context.new_page()
    probes = []
    page.on("request", lambda request: probes.append(request.url) if "timeout=0" in request.url else None)
    page.goto(integrator.serve(
        waiting_page(relay),
        {"Content-Security-Policy": f"connect-src {relay.base}"}))
    page.evaluate("channel => { window.waiting = start(channel); }", created["channel"])
    page.wait_for_function("window.calls.includes('event:1:waiting')")
    assert page.evaluate("window.waiting.transport") == "sse"
    assert len(probes) == 1 and "/poll?" in probes[0], probes

    tap(relay.newest_link())
    expect(page.locator("#status")).to_have_text("Result: verified")
    # The long-poll's answer to "why" carried the first event; the event stream the rest.
    assert calls(page) == [
        "event:1:waiting", "transport:sse", "event:2:tapped", "tapped:2", "event:3:result", "result:verified:3"]


def test_close_stops_the_waiting(shop):
    relay, open_page = shop
    created = relay.create_session()
    page = open_page()
    sockets = []
    page.on("websocket", lambda socket: sockets.append(socket))
    page.evaluate("channel => { window.first = start(channel, 'stopped'); }", created["channel"])
    page.wait_for_function("window.stopped.includes('event:1:waiting')")
    page.evaluate("window.first.close()")
    assert page.evaluate("window.first.transport") is None
    assert len(sockets) == 1
    if not sockets[0].is_closed():
        sockets[0].wait_for_event("close")

    tap(relay.newest_link())
    # A second waiter on the same page sees the outcome: the relay has sent it to every open channel
    # by then, so the closed waiter would have had it too.
    page.evaluate("channel => { window.second = start(channel, 'later'); }", created["channel"])
    page.wait_for_function("window.later.includes('result:verified:3')")
    assert calls(page, "stopped") == ["transport:websocket", "event:1:waiting"]
    assert relay.state(created["sessionId"]) == "verified"


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=IDS)
@pytest.mark.parametrize("fault, status", [("token", 404), ("session", 404)])
def test_errors_that_no_retry_mends_reach_onError_once(shop, name, missing, fault, status):
    relay, open_page = shop
    channel = dict(relay.create_session()["channel"])
    if fault == "token":
        channel["token"] = "not-the-token"
    else:
        for url in ("websocket", "events", "poll"):
            channel[url] = channel[url].replace("/sessions/ses_", "/sessions/ses_unknown")
    page = open_page(missing)
    page.evaluate("channel => { window.waiting = start(channel); }", channel)
    expect(page.locator("#status")).to_have_text(f"Error {status}")
    assert calls(page) == [f"error:{status}"]
    error = page.evaluate("window.callsError")
    assert error["name"] == "LinkRelayError" and error["status"] == status
    assert error["problem"]["status"] == status, "the relay's problem+json reaches the page"
    assert page.evaluate("window.waiting.transport") is None


@pytest.mark.parametrize("name, missing", TRANSPORTS, ids=IDS)
@pytest.mark.parametrize("fault, status", [("origin", 403), ("token", 404)])
def test_a_refusal_reaches_onError_once_and_the_client_stops_asking(
    start_relay, integrator, context, name, missing, fault, status
):
    """A page on an origin the relay does not allow (the relay allows only its own), or with a wrong
    token (answered as an unknown session, v1.3): `onError({status, code, detail})` once, and from then on the page asks the relay nothing,
    counted in the page and, for the refused origin, by the relay's security events."""
    relay = start_relay() if fault == "origin" else start_relay("--allowed-origin", integrator.origin)
    channel = dict(relay.create_session()["channel"])
    if fault == "token":
        channel["token"] = "not-the-token"
    page = context.new_page()
    if missing:
        page.add_init_script(without(*missing))
    page.add_init_script(COUNT_REQUESTS)
    page.goto(integrator.serve(waiting_page(relay)))
    page.evaluate("channel => { window.waiting = start(channel); }", channel)
    expect(page.locator("#status")).to_have_text(f"Error {status}")
    refused = security_events(relay, "channel_origin_refused")
    asked = page.evaluate("window.relayRequests")

    time.sleep(QUIET_SECONDS)
    assert calls(page) == [f"error:{status}"]
    error = page.evaluate("window.callsError")
    assert error["name"] == "LinkRelayError" and error["status"] == status, error
    assert error["code"] == ("origin_not_allowed" if fault == "origin" else "session_not_found"), error
    expected = "This origin may not open channels." if fault == "origin" else "No session with this id."
    assert error["detail"] == expected, error
    assert page.evaluate("window.waiting.transport") is None
    assert page.evaluate("window.relayRequests") == asked, "no request after onError"
    assert 1 <= len(asked) <= 3, asked
    if fault == "origin":
        assert refused >= 1
        assert security_events(relay, "channel_origin_refused") == refused, "the relay heard nothing more"
    else:
        assert security_events(relay, "channel_origin_refused") == 0


def test_finish_asks_for_the_result_after_a_lost_redirect(shop):
    """The phone taps but its redirect never reaches the relay (Prove's Web SDK would say AuthFinish):
    the page's finish makes the relay ask Prove, and the result arrives on the waiting channel."""
    relay, open_page = shop
    created = relay.create_session()
    page = open_page()
    page.evaluate("channel => { window.waiting = start(channel); }", created["channel"])
    page.wait_for_function("window.calls.includes('event:1:waiting')")

    tap(relay.newest_link(), "redirect=0")
    answer = page.evaluate(
        "([session, channel]) => LinkRelay.finish(session, channel)", [created, created["channel"]])
    assert answer["sessionId"] == created["sessionId"]
    expect(page.locator("#status")).to_have_text("Result: verified")
    assert calls(page) == ["transport:websocket", "event:1:waiting", "event:2:result", "result:verified:2"]

    # Once the session has ended, finish answers 200: done.
    again = page.evaluate(
        "([id, channel]) => LinkRelay.finish(id, channel)", [created["sessionId"], created["channel"]])
    assert again == {"sessionId": created["sessionId"], "state": "verified", "done": True}


def test_finish_refusals_reject_with_the_relays_status(shop):
    relay, open_page = shop
    created = relay.create_session()
    channel = created["channel"]
    page = open_page()
    rejected = """async ([session, channel, options]) => {
        try { return {answer: await LinkRelay.finish(session, channel, options)}; }
        catch (error) { return {name: error.name, status: error.status, message: error.message}; } }"""

    wrong_token = page.evaluate(rejected, [created["sessionId"], dict(channel, token="nope"), {}])
    assert wrong_token["name"] == "LinkRelayError" and wrong_token["status"] == 404, wrong_token
    bad_redirect = page.evaluate(rejected, [created["sessionId"], channel, {"redirectUrl": "https://elsewhere/"}])
    assert bad_redirect["status"] == 400, bad_redirect
    other_session = page.evaluate(rejected, ["ses_other", channel, {}])
    assert other_session["name"] == "TypeError", other_session
    # None of these changed the session; a good call is accepted while it waits.
    assert relay.state(created["sessionId"]) == "waiting"
    accepted = page.evaluate(rejected, [created["sessionId"], channel, {}])
    assert accepted["answer"] == {"sessionId": created["sessionId"], "state": "waiting", "done": False}
