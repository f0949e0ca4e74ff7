"""A headless Firefox (Debian's firefox-esr) driven over WebDriver BiDi, for the browser tests.

Playwright drives only its own patched Firefox, which cannot be downloaded here; a stock Firefox speaks
WebDriver BiDi (https://w3c.github.io/webdriver-bidi/) by itself once started with
`--remote-debugging-port`, at ws://127.0.0.1:PORT/session. This module speaks just enough of it for
the tests: a user context (like a Playwright context: its own cookies and storage) per test, a tab in
it, init scripts, navigation, JavaScript whose promises are awaited, polling with a deadline, real
clicks and typing, screenshots, and the pages' errors and console errors.

    browser = Firefox("/usr/bin/firefox-esr", directory, deadline=30).start()
    tab = browser.new_tab()
    tab.goto("http://127.0.0.1:8080/")
    tab.wait_for("document.querySelector('h1')?.textContent", "the heading", lambda text: text == "Hi")
    tab.call("name => greet(name)", "Ann")
    browser.close_tab(tab)        # the errors of its pages, as strings
    browser.quit()
"""

import base64
import contextlib
import itertools
import json
import os
import pathlib
import queue
import re
import signal
import subprocess
import threading
import time


def wait_until(condition, what, deadline):
    """Polls `condition` until it returns something true, or fails the test after `deadline` seconds."""
    end = time.monotonic() + deadline
    while True:
        value = condition()
        if value:
            return value
        if time.monotonic() > end:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# Firefox's preferences in the throwaway profile. The proxy is a port where nothing listens, with
# loopback exempt: whatever Firefox would fetch by itself (updates, telemetry, remote settings, safe
# browsing) never leaves the machine, while the relays and the integrator's server on 127.0.0.x are
# reached directly. The rest keeps background services from starting at all.
PREFERENCES = {
    "remote.active-protocols": 1,  # WebDriver BiDi only
    "network.proxy.type": 1,
    "network.proxy.http": "127.0.0.1",
    "network.proxy.http_port": 9,
    "network.proxy.ssl": "127.0.0.1",
    "network.proxy.ssl_port": 9,
    "network.proxy.no_proxies_on": "127.0.0.1, 127.0.0.2, localhost",
    "network.trr.mode": 5,
    "network.dns.disablePrefetch": True,
    "network.predictor.enabled": False,
    "network.http.speculative-parallel-limit": 0,
    "network.captive-portal-service.enabled": False,
    "network.connectivity-service.enabled": False,
    "app.update.disabledForTesting": True,
    "app.normandy.enabled": False,
    "browser.safebrowsing.malware.enabled": False,
    "browser.safebrowsing.phishing.enabled": False,
    "browser.safebrowsing.downloads.enabled": False,
    "browser.shell.checkDefaultBrowser": False,
    "browser.startup.page": 0,
    "browser.newtabpage.enabled": False,
    "datareporting.policy.dataSubmissionEnabled": False,
    "datareporting.healthreport.uploadEnabled": False,
    "toolkit.telemetry.enabled": False,
    "toolkit.telemetry.server": "",
    "extensions.getAddons.cache.enabled": False,
    "extensions.update.enabled": False,
}


class BiDiError(Exception):
    """A command that Firefox answered with an error (`error` is the spec's code, e.g. "no such frame")."""

    def __init__(self, method, answer):
        self.error = answer.get("error")
        super().__init__(f"{method}: {self.error}: {answer.get('message')}")


class ScriptError(AssertionError):
    """JavaScript that threw (or a promise that rejected) in the page."""


class Firefox:
    """The firefox-esr process and its one BiDi session; one per test run, as Chromium is."""

    def __init__(self, executable, directory, deadline):
        self.executable = executable
        self.directory = pathlib.Path(directory)
        self.deadline = deadline
        self.child = None
        self.socket = None
        self.exits = contextlib.ExitStack()
        self.ids = itertools.count(1)
        self.answers = {}
        self.answers_lock = threading.Lock()
        self.entries = []  # log.entryAdded parameters, in arrival order

    def start(self):
        profile = self.directory / "profile"
        profile.mkdir(parents=True)
        (profile / "user.js").write_text(
            "".join(f"user_pref({json.dumps(name)}, {json.dumps(value)});\n" for name, value in PREFERENCES.items()))
        self.log_path = self.directory / "firefox.log"
        with open(self.log_path, "w") as log:
            # A session of its own, so that teardown can end the content processes with the parent.
            self.child = subprocess.Popen(
                [self.executable, "--headless", "--no-remote", "--remote-debugging-port", "0",
                 "--profile", str(profile), "about:blank"],
                stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
                env=dict(os.environ, MOZ_CRASHREPORTER_DISABLE="1"))
        # Port 0: Firefox takes a free port and says which.
        address = self._until(lambda: self._listening(), "Firefox's WebDriver BiDi address")
        from websockets.sync.client import connect

        # Screenshots come back as one message of base64: no size limit. Entered as a context manager,
        # as websockets asks, and left in quit().
        self.socket = self.exits.enter_context(
            connect(address + "/session", max_size=None, open_timeout=self.deadline))
        threading.Thread(target=self._read, name="firefox-bidi", daemon=True).start()
        self.capabilities = self.command("session.new", capabilities={})["capabilities"]
        self.command("session.subscribe", events=["log.entryAdded"])
        return self

    def _listening(self):
        found = re.search(r"WebDriver BiDi listening on (ws://\S+)", self.log())
        if found:
            return found.group(1)
        if self.child.poll() is not None:
            raise RuntimeError(f"firefox exited with {self.child.returncode}:\n{self.log()}")
        return None

    def _until(self, condition, what):
        return wait_until(condition, what, self.deadline)

    def _read(self):
        """The socket's one reader: answers go to the command that waits for them, events are kept."""
        try:
            for text in self.socket:
                message = json.loads(text)
                if message.get("type") == "event":
                    if message.get("method") == "log.entryAdded":
                        self.entries.append(message["params"])
                    continue
                with self.answers_lock:
                    waiting = self.answers.pop(message.get("id"), None)
                if waiting:
                    waiting.put(message)
        except Exception:
            pass
        finally:
            # Whoever still waits learns at once that no answer comes.
            with self.answers_lock:
                for waiting in self.answers.values():
                    waiting.put(None)
                self.answers.clear()

    def command(self, method, **params):
        """Sends one command and returns its result; raises BiDiError for an error answer."""
        number = next(self.ids)
        waiting = queue.Queue(1)
        with self.answers_lock:
            self.answers[number] = waiting
        self.socket.send(json.dumps({"id": number, "method": method, "params": params}))
        try:
            answer = waiting.get(timeout=self.deadline)
        except queue.Empty:
            raise AssertionError(f"Firefox did not answer {method} in {self.deadline} s") from None
        if answer is None:
            raise RuntimeError(f"the BiDi connection closed before Firefox answered {method}:\n{self.log()}")
        if answer.get("type") == "error":
            raise BiDiError(method, answer)
        return answer["result"]

    def new_tab(self, width=900, height=900):
        """A tab in a user context of its own: no cookie or storage of another test's pages."""
        user_context = self.command("browser.createUserContext")["userContext"]
        context = self.command("browsingContext.create", type="tab", userContext=user_context)["context"]
        self.command("browsingContext.setViewport", context=context, viewport={"width": width, "height": height})
        return Tab(self, context, user_context)

    def close_tab(self, tab):
        """Closes the tab and its user context; returns the errors Firefox reported of its pages (log
        entries of type "javascript": uncaught exceptions, unhandled rejections, CSP violations)."""
        self.command("browser.removeUserContext", userContext=tab.user_context)
        return [entry["text"] for entry in tab.log() if entry.get("type") == "javascript"]

    def quit(self):
        """Asks Firefox to close; kills its process group if it has not exited by the deadline."""
        if self.child is None:
            return
        try:
            if self.socket is not None:
                self.command("browser.close")
            self.exits.close()
            self.child.wait(timeout=self.deadline)
        except Exception:
            pass
        finally:
            try:
                os.killpg(self.child.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self.child.wait()

    def log(self):
        with open(self.log_path, "rb") as log:
            return log.read().decode("utf-8", "replace")


class Tab:
    """One top-level browsing context: what a test does in a page."""

    def __init__(self, firefox, context, user_context):
        self.firefox = firefox
        self.context = context
        self.user_context = user_context
        # Page errors the test expects (substrings of their text): Firefox reports a WebSocket that the
        # server refused as a page error, which a test of that refusal must allow.
        self.expected_errors = []

    def add_init_script(self, source):
        """Runs `source` (statements) in every document the tab loads, before the page's own scripts."""
        self.firefox.command(
            "script.addPreloadScript", functionDeclaration="() => {" + source + "}", contexts=[self.context])

    def goto(self, url):
        """Navigates and waits for the load event."""
        self.firefox.command("browsingContext.navigate", context=self.context, url=url, wait="complete")

    def call(self, function, *arguments):
        """Calls the JavaScript function (source text) with JSON arguments, awaits what it returns and
        gives that back as JSON. Built as one declaration, so that the page's CSP (no eval) has no say.
        The page's own try/catch reports what it throws: Firefox 153 answers a rejection with a page's
        Error by "unknown error: Missing stack" rather than with the exception."""
        declaration = (
            "async () => { try { return JSON.stringify({value: await (" + function + ")("
            + ", ".join(json.dumps(argument) for argument in arguments) + ")}); }"
            " catch (error) { return JSON.stringify({thrown: String(error) + '\\n' + (error && error.stack)}); } }")
        result = self.firefox.command(
            "script.callFunction", functionDeclaration=declaration, awaitPromise=True,
            target={"context": self.context}, userActivation=True)
        if result["type"] == "exception":
            raise ScriptError(result["exceptionDetails"]["text"])
        answer = json.loads(result["result"]["value"])
        if "thrown" in answer:
            raise ScriptError(f"{function} threw {answer['thrown']}")
        return answer.get("value")

    def evaluate(self, expression):
        """The value of a JavaScript expression (a promise is awaited), as JSON."""
        return self.call("() => (" + expression + ")")

    def wait_for(self, expression, what, until=bool):
        """Polls `expression` until `until(value)` holds; fails after the deadline with the last value.
        A navigation under way (its document going, the next not there yet) is polled through."""
        end = time.monotonic() + self.firefox.deadline
        value = None
        while True:
            try:
                value = self.evaluate(expression)
                if until(value):
                    return value
            except BiDiError as error:
                value = error
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for {what}; last seen: {value!r}")
            time.sleep(0.05)

    def wait_for_text(self, selector, text):
        """Waits until the first element matching `selector` has `text` (whitespace trimmed)."""
        return self.wait_for(
            f"document.querySelector({json.dumps(selector)})?.textContent.trim()",
            f"{selector} to say {text!r}", lambda value: value == text)

    def element(self, selector):
        """The first element matching `selector`, as a BiDi shared reference (for input actions)."""
        end = time.monotonic() + self.firefox.deadline
        while True:
            result = self.firefox.command(
                "script.evaluate", expression=f"document.querySelector({json.dumps(selector)})",
                awaitPromise=False, target={"context": self.context})
            if result["type"] == "success" and result["result"]["type"] == "node":
                return {"sharedId": result["result"]["sharedId"]}
            if time.monotonic() > end:
                raise AssertionError(f"timed out waiting for an element {selector}")
            time.sleep(0.05)

    def click(self, selector):
        """A real mouse click in the middle of the element, as a person's."""
        origin = {"type": "element", "element": self.element(selector)}
        self.firefox.command("input.performActions", context=self.context, actions=[{
            "type": "pointer", "id": "mouse", "parameters": {"pointerType": "mouse"}, "actions": [
                {"type": "pointerMove", "x": 0, "y": 0, "origin": origin},
                {"type": "pointerDown", "button": 0},
                {"type": "pointerUp", "button": 0},
            ]}])
        self.firefox.command("input.releaseActions", context=self.context)

    def fill(self, selector, text):
        """Clicks into the field, selects what it holds (Ctrl+A) and types `text` over it key by key."""
        self.click(selector)
        control = "\ue009"  # WebDriver's key code of Control
        keys = [{"type": "keyDown", "value": control}, {"type": "keyDown", "value": "a"},
                {"type": "keyUp", "value": "a"}, {"type": "keyUp", "value": control}]
        for character in text:
            keys += [{"type": "keyDown", "value": character}, {"type": "keyUp", "value": character}]
        self.firefox.command("input.performActions", context=self.context, actions=[
            {"type": "key", "id": "keyboard", "actions": keys}])
        self.firefox.command("input.releaseActions", context=self.context)

    def screenshot(self, path, full_page=True):
        """Writes a PNG of the whole document (`full_page`) or of the viewport."""
        result = self.firefox.command(
            "browsingContext.captureScreenshot", context=self.context,
            origin="document" if full_page else "viewport")
        pathlib.Path(path).write_bytes(base64.b64decode(result["data"]))

    def log(self):
        """The log entries of this tab's pages so far: page errors ("javascript") and console calls."""
        return [entry for entry in list(self.firefox.entries)
                if entry.get("source", {}).get("context") == self.context]

    def console_errors(self):
        return [entry["text"] for entry in self.log() if entry.get("type") == "console" and entry.get("level") == "error"]
