"""The client matrix: the README's walkthrough (create, wait, tap, read, finish, cancel, refusals,
webhooks) driven by each client integrators use, every one held to the same answers.

Each client runs the walkthrough once against the run's relay (conftest.py) and leaves a transcript;
each (client, step) is then a test that compares the transcript's step with expectations.json, the
one table for every client. A client that cannot do a step (a WebSocket from requests; the API key's
steps from a page) has no test for it.
"""

import json
import os
import pathlib
import subprocess
import time

import pytest
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

import pages
import walkthrough

HERE = pathlib.Path(__file__).resolve().parent
EXPECTED = {name: entry for name, entry in json.loads((HERE / "expectations.json").read_text()).items()
            if not name.startswith("_")}
NODE = os.environ.get("LINKRELAY_NODE", "node")

# The steps a page does itself; the rest are the backend's (API key), which a page never holds.
PAGE_STEPS = ["wait_ws", "wait_sse", "wait_poll", "tap", "finish_ended_token", "finish_waiting_token",
              "finish_wrong_token", "poll_unknown", "poll_wrong_token", "poll_no_token", "refused_origin"]


def steps_of(client):
    if client in ("chromium", "firefox"):
        return PAGE_STEPS
    no_websocket = client in ("curl", "requests", "httpx")
    return [step for step in EXPECTED if not (step == "wait_ws" and no_websocket)]


CLIENTS = ["curl", "requests", "aiohttp", "httpx", "node", "chromium", "firefox"]
CASES = [(client, step) for client in CLIENTS for step in steps_of(client)]


@pytest.fixture(scope="session")
def transcripts(matrix, request, tmp_path_factory):
    """Each client's transcript, made the first time a test asks for it."""
    made = {}

    def of(client):
        if client not in made:
            made[client] = run(client, matrix, request, tmp_path_factory)
        return made[client]

    return of


def run(client, matrix, request, tmp_path_factory):
    relay = matrix.relay
    if client in walkthrough.CLIENTS:
        adapter = walkthrough.CLIENTS[client]()
        try:
            return walkthrough.walk(adapter, relay.base, matrix.key, matrix.other.origin)
        finally:
            adapter.close()
    if client == "node":
        path = tmp_path_factory.mktemp("node") / "transcript.json"
        done = subprocess.run(
            [NODE, "--test", "--test-reporter=spec", str(HERE / "node" / "walkthrough.test.mjs")],
            env=dict(os.environ, LINKRELAY_URL=relay.base, LINKRELAY_KEY=matrix.key,
                     LINKRELAY_OTHER_ORIGIN=matrix.other.origin, LINKRELAY_TRANSCRIPT=str(path)),
            capture_output=True, text=True, timeout=120)
        if not path.exists():
            raise AssertionError(f"node --test wrote no transcript (exit {done.returncode}):\n"
                                 f"{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
        transcript = json.loads(path.read_text())
        transcript["node --test"] = done.stdout[-4000:]
        return transcript
    if client == "chromium":
        browser_pages = pages.ChromiumPages(request.getfixturevalue("browser"))
    else:
        browser_pages = pages.FirefoxPages(request.getfixturevalue("firefox_browser"))
    try:
        return pages.walk(browser_pages, matrix.backend, relay, matrix.shop, matrix.other, matrix.waiting_page)
    finally:
        browser_pages.close()


def at(body, path):
    """The value at a dotted path of a JSON body; KeyError where there is none."""
    value = body
    for part in path.split("."):
        if not isinstance(value, dict) or part not in value:
            raise KeyError(path)
        value = value[part]
    return value


def differences(expected, seen):
    """What in `seen` (a transcript's step) differs from `expected` (its entry in expectations.json)."""
    if "error" in seen:
        return [f"the step failed: {seen['error']}"]
    unobservable = set(seen.get("unobservable", ()))
    found = []

    def check(what, want, got):
        if what not in unobservable and want != got:
            found.append(f"{what}: expected {want!r}, got {got!r}")

    body = seen.get("body")
    for item in ("status", "type", "events", "ended"):
        if item in expected:
            check(item, expected[item], seen.get(item))
    if "code" in expected:
        check("code", expected["code"], body.get("code") if isinstance(body, dict) else None)
    for path in expected.get("keys", ()):
        try:
            at(body, path)
        except KeyError:
            found.append(f"the body has no {path}")
    for path, want in expected.get("fields", {}).items():
        try:
            check(path, want, at(body, path))
        except KeyError:
            found.append(f"the body has no {path}")
    for name, want in expected.get("derived", {}).items():
        check(name, want, seen.get("derived", {}).get(name))
    return found


class Webhooks:
    """Every message the shop's receiver got, by session id, each verified with standardwebhooks."""

    def __init__(self, matrix):
        self.receiver = matrix.receiver
        self.webhook = Webhook(matrix.webhook_secret)
        self.by_session = {}
        self.unverified = []

    def take(self, deadline):
        headers, body = self.receiver.messages.get(timeout=max(0.01, deadline - time.monotonic()))
        try:
            payload = self.webhook.verify(body, headers)
        except WebhookVerificationError as error:
            self.unverified.append(f"{headers.get('webhook-id')}: {error}")
            payload = json.loads(body)
        self.by_session.setdefault(payload["data"]["sessionId"], []).append(payload["type"])

    def observe(self, verified_id, cancelled_id):
        expected = EXPECTED["webhooks"]["derived"]
        deadline = time.monotonic() + walkthrough.DEADLINE

        def types(session_id):
            return sorted(set(self.by_session.get(session_id, [])))

        while (types(verified_id), types(cancelled_id)) != (expected["verifiedSession"], expected["cancelledSession"]):
            if time.monotonic() > deadline:
                break
            try:
                self.take(deadline)
            except Exception:
                break
        return {"derived": {"verifiedSession": types(verified_id), "cancelledSession": types(cancelled_id),
                            "signaturesVerify": not self.unverified}, "unverified": self.unverified}


@pytest.fixture(scope="session")
def webhooks(matrix):
    return Webhooks(matrix)


@pytest.mark.parametrize("client, step", CASES, ids=[f"{client}-{step}" for client, step in CASES])
def test_every_client_gets_the_same_answer(client, step, transcripts, webhooks):
    transcript = transcripts(client)
    if step in transcript.get("skipped", {}):
        pytest.skip(transcript["skipped"][step])
    if step == "webhooks":
        sessions = transcript.get("sessions", [])
        assert len(sessions) >= 2, f"the walkthrough made no sessions to hear of: {transcript.get('create')}"
        seen = webhooks.observe(sessions[0], sessions[1])
    else:
        assert step in transcript, f"{client} never reached {step}: {json.dumps(transcript)[:2000]}"
        seen = transcript[step]
    found = differences(EXPECTED[step], seen)
    assert not found, f"{client} {step}: " + "; ".join(found) + f"\nwhat it saw: {json.dumps(seen, ensure_ascii=False)[:1500]}"
