"""Fixtures of the client matrix: one relay process for the whole run (two tenants from a tenants file,
the shop's webhook pointing at a receiver on loopback), the integrators' origins, and the browsers.

The relay process, the integrators' web servers and the browsers are Tests/browser/conftest.py's,
loaded here under another module name (both files are called conftest.py)."""

import base64
import importlib.util
import json
import os
import pathlib
import queue
import secrets
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

BROWSER_TESTS = pathlib.Path(__file__).resolve().parents[1] / "browser"
sys.path.insert(0, str(BROWSER_TESTS))  # its conftest imports `firefox` from beside it
_spec = importlib.util.spec_from_file_location("browser_support", BROWSER_TESTS / "conftest.py")
browser_support = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(browser_support)

# The browser fixtures, registered here by name: the headless Chromium and Firefox, one each per run.
browser = browser_support.browser
firefox_browser = browser_support.firefox_browser

SHOP_KEY = "shop-" + secrets.token_hex(16)
OTHER_KEY = "other-" + secrets.token_hex(16)
WEBHOOK_SECRET = "whsec_" + base64.b64encode(os.urandom(32)).decode()


class Receiver:
    """The shop's webhook receiver: keeps each POST's headers and raw body, answers 204."""

    def __init__(self):
        self.messages = queue.Queue()
        received = self.messages

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                received.put(({name.lower(): value for name, value in self.headers.items()}, body))
                self.send_response(204)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hooks/linkrelay"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


class Matrix:
    """What every client's walkthrough runs against."""

    def __init__(self, relay, receiver, shop, other):
        self.relay = relay
        self.receiver = receiver
        self.shop = shop
        self.other = other
        self.key = SHOP_KEY
        self.webhook_secret = WEBHOOK_SECRET
        self.waiting_page = browser_support.waiting_page

    def backend(self, method, path, body=None):
        """The shop's backend (urllib, its API key): (status, JSON answer)."""
        status, _, answer = browser_support.http(
            method, self.relay.url(path), body, {"Authorization": f"Bearer {SHOP_KEY}"})
        return status, answer


@pytest.fixture(scope="session")
def matrix(tmp_path_factory):
    directory = tmp_path_factory.mktemp("matrix")
    receiver = Receiver()
    shop, other = browser_support.Integrator(), browser_support.Integrator()
    tenants = directory / "tenants.json"
    tenants.write_text(json.dumps({"tenants": [
        {"name": "shop", "apiKeys": [SHOP_KEY], "allowedOrigins": [shop.origin],
         "webhook": {"url": receiver.url, "secret": WEBHOOK_SECRET}},
        {"name": "other", "apiKeys": [OTHER_KEY], "allowedOrigins": [other.origin]},
    ]}))
    relay = browser_support.Relay(directory, ["--tenants", str(tenants)]).start()
    try:
        yield Matrix(relay, receiver, shop, other)
    finally:
        relay.stop()
        shop.stop()
        other.stop()
        receiver.stop()
