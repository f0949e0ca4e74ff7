"""The relay's webhooks, verified with the public `standardwebhooks` library (pip install standardwebhooks).

Starts the relay binary (LINKRELAY_BINARY, default .build/debug/linkrelay) on the embedded sandbox with a
receiver on loopback, runs a session to verified, and checks every message the way an integrator would:
its signature, and its body against the `WebhookPayload` schema of the relay's own /openapi.json.
"""

import base64
import http.server
import json
import os
import queue
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from standardwebhooks.webhooks import Webhook, WebhookVerificationError

BINARY = os.environ.get("LINKRELAY_BINARY", ".build/debug/linkrelay")
SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()
KEY = "py-test-key-0123456789abcdef"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def receiver():
    """A receiver that keeps each request's headers and raw body."""
    received = queue.Queue()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            received.put((dict(self.headers), body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/hook", received
    server.shutdown()


@pytest.fixture
def relay(receiver):
    url, _ = receiver
    port = free_port()
    with tempfile.TemporaryDirectory() as directory:
        process = subprocess.Popen(
            [BINARY, "--port", str(port), "--store", f"sqlite:{directory}/relay.sqlite", "--api-key", KEY,
             "--drain-delay", "0", "--webhook-url", url, "--webhook-secret", SECRET],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 30
        while True:
            try:
                urllib.request.urlopen(base + "/readyz", timeout=1)
                break
            except OSError:
                assert time.time() < deadline, "the relay did not start"
                time.sleep(0.1)
        yield base
        process.terminate()
        process.wait(timeout=30)


def call(method, url, body=None):
    request = urllib.request.Request(url, method=method, data=json.dumps(body).encode() if body else None)
    request.add_header("Authorization", f"Bearer {KEY}")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def test_every_message_verifies_with_standardwebhooks(relay, receiver):
    _, received = receiver
    session = call("POST", relay + "/v1/sessions", {"phoneNumber": "2001004014"})
    outbox = json.load(urllib.request.urlopen(relay + "/sandbox/outbox?phoneNumber=2001004014"))
    urllib.request.urlopen(outbox["messages"][-1]["link"])  # the phone taps; the redirect lands on the relay

    webhook = Webhook(SECRET)
    document = json.load(urllib.request.urlopen(relay + "/openapi.json"))
    schema = Draft202012Validator(
        {"$ref": "#/components/schemas/WebhookPayload", "components": document["components"]})
    types = set()
    for _ in range(2):
        headers, body = received.get(timeout=30)
        payload = webhook.verify(body, headers)
        assert payload["data"]["sessionId"] == session["sessionId"]
        schema.validate(payload)
        if payload["type"] == "session.verified":
            # A boolean that means what it says, and Prove's own string beside it.
            assert payload["data"]["result"]["success"] is True
            assert payload["data"]["result"]["proveSuccess"] == "true"
        types.add(payload["type"])
        # A body changed on the way, or another secret, does not verify.
        with pytest.raises(WebhookVerificationError):
            webhook.verify(body.replace(b"session.", b"sessiom."), headers)
        with pytest.raises(WebhookVerificationError):
            Webhook("whsec_" + base64.b64encode(os.urandom(32)).decode()).verify(body, headers)
    assert types == {"session.tapped", "session.verified"}


GUIDE = Path(__file__).resolve().parents[2] / "docs" / "webhook-receivers.md"


def guide_code(language):
    """The receivers' guide's code block in `language`."""
    return re.search(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(), re.S | re.M).group(1)


def a_message(relay, received):
    """One of the relay's messages, as received: its headers (lower-case names) and raw body."""
    session = call("POST", relay + "/v1/sessions", {"phoneNumber": "2001004014"})
    call("POST", relay + f"/v1/sessions/{session['sessionId']}/cancel")
    headers, body = received.get(timeout=30)
    return {name.lower(): value for name, value in headers.items()}, body


def forged(headers, body):
    """What the guide's code must refuse: a changed body, another secret, a replayed old message."""
    other = "whsec_" + base64.b64encode(os.urandom(32)).decode()
    old = {**headers, "webhook-timestamp": str(int(headers["webhook-timestamp"]) - 600)}
    return [(SECRET, headers, body.replace(b"session.", b"sessiom.")), (other, headers, body), (SECRET, old, body)]


def test_the_guides_python_verifies_the_relays_messages(relay, receiver):
    _, received = receiver
    headers, body = a_message(relay, received)
    namespace = {}
    exec(guide_code("python"), namespace)
    verify = namespace["verify"]
    assert verify(SECRET, headers, body)["type"] == "session.cancelled"
    for case in forged(headers, body):
        with pytest.raises(ValueError):
            verify(*case)


@pytest.mark.skipif(shutil.which("node") is None, reason="no node on this machine")
def test_the_guides_node_verifies_the_relays_messages(relay, receiver, tmp_path):
    _, received = receiver
    headers, body = a_message(relay, received)
    (tmp_path / "verify.js").write_text(guide_code("js"))
    (tmp_path / "run.js").write_text(
        'const { verify } = require("./verify.js");\n'
        'const cases = JSON.parse(require("node:fs").readFileSync(0, "utf8"));\n'
        "console.log(JSON.stringify(cases.map(([secret, headers, body]) => {\n"
        '  try { return verify(secret, headers, Buffer.from(body, "base64")).type; } catch (e) { return "refused"; }\n'
        "})));\n")
    cases = [(SECRET, headers, body)] + forged(headers, body)
    answer = subprocess.run(
        ["node", str(tmp_path / "run.js")], capture_output=True, check=True, timeout=30,
        input=json.dumps([(s, h, base64.b64encode(b).decode()) for s, h, b in cases]).encode())
    assert json.loads(answer.stdout) == ["session.cancelled", "refused", "refused", "refused"]
