"""schemathesis hooks for scripts/api-check.sh: steer part of the generated requests to data the relay knows.

Fuzzed values alone reach little behind the relay's first checks: a random phone number is not one of the
sandbox's test users (Prove refuses it: 422), a random link key or session id is unknown (404), a channel
token must be that session's (401), and a random `Origin` is refused (403). So about half of the requests
that carry one of these get a value the relay knows instead; the others keep the generated one. Nothing
here changes what is checked, only what is sent.

Sessions live at most 3 s (`--hold 3`, and `holdSeconds` is capped here), so channels opened on them end
by then. Which requests are steered follows from the generated data itself (a CRC of it), so a case that
hypothesis replays is the same case.
"""

import os
import threading
import zlib
from collections.abc import Mapping
from datetime import datetime
from urllib.parse import urlsplit

import schemathesis

# The relay's origin, which it allows on channels (its public URL's).
ORIGIN = os.environ["API_CHECK_URL"].rstrip("/")
# Prove's test users in the sandbox: Instant Link, short-term and possession-required kinds.
TEST_USERS = ["2001004014", "2001004015", "2001004018", "+2001004029", "2001004016"]
# Pre-Fill's: short-term (passes without a tap), then three that the link's tap passes.
PREFILL_USERS = ["2001001695", "2001001693", "2001001688", "2001001687"]
HOLD = 3
# The routes of one session that take its channel token.
TOKEN_ROUTES = {"events", "poll", "ws", "finish"}

# Sessions created during this run with a short hold: (id, channel token, link key).
_lock = threading.Lock()
_sessions: list[tuple[str, str, str]] = []


@schemathesis.hook
def after_call(context, case, response):
    """Keeps every session created whose hold is short (an explicit example may ask for a long one)."""
    if case.operation.label != "POST /v1/sessions" or response.status_code != 201:
        return
    try:
        body = response.json()
        hold = datetime.fromisoformat(body["expiresAt"]) - datetime.fromisoformat(body["createdAt"])
        session = (body["sessionId"], body["channel"]["token"], urlsplit(body["finalTargetUrl"]).path.split("/")[-1])
    except (ValueError, KeyError, TypeError, AttributeError):
        return
    if hold.total_seconds() <= HOLD:
        with _lock:
            _sessions.append(session)
            del _sessions[:-50]


@schemathesis.hook
def map_case(context, case):
    coin = zlib.crc32(repr((case.path_parameters, case.query, case.body, dict(case.headers or {}))).encode())
    steer = coin % 2 == 0
    pick = coin // 2
    path = case.operation.path
    with _lock:
        known = list(_sessions)

    if path == "/v1/sessions" and isinstance(case.body, dict):
        hold = case.body.get("holdSeconds")
        if isinstance(hold, int) and not isinstance(hold, bool) and HOLD < hold <= 600:
            case.body["holdSeconds"] = HOLD
        if steer and isinstance(case.body.get("phoneNumber"), str):
            users = PREFILL_USERS if case.body.get("flow") == "prefill" else TEST_USERS
            case.body["phoneNumber"] = users[pick % len(users)]

    if steer and known and isinstance(case.path_parameters, dict):
        session_id, token, key = known[pick % len(known)]
        if path == "/l/{key}":
            case.path_parameters["key"] = key
        elif path.startswith("/v1/sessions/{id}"):
            case.path_parameters["id"] = session_id
            if path.rsplit("/", 1)[-1] in TOKEN_ROUTES and isinstance(case.query, dict) and pick % 4:
                case.query["token"] = token

    # On a session of this run, a channel's cursor is never ahead of the session: a cursor from the
    # future holds a channel past the session's end (docs/openapi.md), which is not what this run checks.
    if path.rsplit("/", 1)[-1] in ("events", "poll", "ws") and isinstance(case.path_parameters, dict):
        if case.path_parameters.get("id") in {session_id for session_id, _, _ in known}:
            if isinstance(case.query, dict) and _whole(case.query.get("after")) > 1:
                case.query["after"] = 1
            if isinstance(case.headers, Mapping) and _whole(case.headers.get("Last-Event-ID")) > 1:
                case.headers["Last-Event-ID"] = "1"

    if isinstance(case.headers, Mapping) and "Origin" in case.headers and (coin // 3) % 2 == 0:
        case.headers["Origin"] = ORIGIN
    return case


def _whole(value) -> int:
    """A cursor's value as the relay reads it; -1 when it is none."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1
