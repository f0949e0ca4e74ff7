// LinkRelay's browser client, served by the relay at /v1/client.js (docs/browser-client.md).
//
//   const waiting = LinkRelay.wait(channel, { onTapped, onResult, onExpired, onCancelled, onError });
//   // onError({status, code, detail}): the relay refused (401, 403, 404, 410, …); the client has stopped.
//   waiting.close();                                  // stop early; no handler is called after it
//   await LinkRelay.finish(sessionId, channel);       // the finish hook (Prove's Web SDK said AuthFinish)
//
// `channel` is the `channel` object of the relay's `POST /v1/sessions` answer. Plain ES2017, no
// dependencies and no build step, so that a reader can check what runs on their page.
(function (global) {
  "use strict";

  // The transports, best first; each is tried only when the browser has it and the channel names it.
  const TRANSPORTS = ["websocket", "sse", "poll"];
  const EVENT_TYPES = ["waiting", "tapped", "result", "expired", "cancelled"];
  const TERMINAL = ["result", "expired", "cancelled"];
  // Whether an answer is a refusal that no retry can mend: no token (401), a refused origin (403), no
  // such session or a wrong token (404), one that has gone (410), a malformed request (400). What may pass later is
  // retried: no answer at all, a 5xx, 429 (too many requests), 408 (a request timeout), a 1012 close.
  function isRefusal(status) {
    return status >= 400 && status < 500 && status !== 408 && status !== 429;
  }
  // Seconds the relay holds a long-poll open (at most 55).
  const POLL_SECONDS = 25;
  // The delay before reconnecting grows from BASE to CAP milliseconds, with jitter, so that a relay
  // that restarts is not met by every waiting browser at once; a connection that stays open for
  // HEALTHY milliseconds, or delivers an event, starts the count again.
  const BACKOFF_BASE = 500;
  const BACKOFF_CAP = 30000;
  const HEALTHY = 5000;

  // An error the client reports, `{status, code, detail}` and more: `status` is the relay's HTTP status
  // (0 when none was read), `code` the problem's stable `code` word and `detail` its detail (each null
  // when the answer has none), `problem` the whole problem+json body, when the relay sent one.
  class LinkRelayError extends Error {
    constructor(message, status, problem) {
      super(message);
      this.name = "LinkRelayError";
      this.status = status;
      this.problem = problem || null;
      this.code = problem && typeof problem.code === "string" ? problem.code : null;
      this.detail = problem && typeof problem.detail === "string" ? problem.detail : null;
    }
  }

  function url(base, params) {
    const result = new URL(base, global.location ? global.location.href : undefined);
    for (const name of Object.keys(params)) result.searchParams.set(name, String(params[name]));
    return result.href;
  }

  // A fetch answer as {status, body}: the JSON body, or null when it is not JSON. Network failures throw.
  async function fetchJSON(target, options) {
    const response = await fetch(target, Object.assign({ cache: "no-store", credentials: "omit" }, options));
    let body = null;
    try {
      body = await response.json();
    } catch (ignored) {
      // A 204, a proxy's HTML page or a cut body: the status says enough.
    }
    return { status: response.status, body: body };
  }

  function errorFor(status, body, what) {
    const problem = body && typeof body === "object" && body.status ? body : null;
    const detail = problem && (problem.detail || problem.title);
    return new LinkRelayError(detail || what + " answered " + status, status, problem);
  }

  // The openers. Each opens one connection from the cursor `after()` and reports through `link`:
  // `open()` once it is established, `event(e)` per event, `end(info)` once when it ends. It returns
  // what closes it.

  function openWebSocket(channel, after, link) {
    let socket;
    try {
      socket = new WebSocket(url(channel.websocket, { token: channel.token, after: after() }));
    } catch (error) {
      // A URL the browser refuses, or a policy (CSP) that forbids it.
      Promise.resolve().then(() => link.end({}));
      return () => {};
    }
    let opened = false;
    socket.onopen = () => {
      opened = true;
      link.open();
    };
    socket.onmessage = (message) => link.event(parse(message.data));
    // Every end looks alike here: 1000 after a terminal event, 1012 when the relay restarts, 1006 when
    // the connection drops or the upgrade was refused (browsers do not show why).
    socket.onclose = (close) => link.end({ opened: opened, code: close.code });
    // A failure is an error event before the close, or without one: Chromium reports a socket that its
    // page's CSP forbids with an error alone.
    socket.onerror = () => {
      socket.onclose = null;
      link.end({ opened: opened });
    };
    return () => {
      socket.onclose = null;
      socket.onerror = null;
      socket.close(1000);
    };
  }

  function openEventSource(channel, after, link) {
    let source;
    try {
      source = new EventSource(url(channel.events, { token: channel.token, after: after() }));
    } catch (error) {
      Promise.resolve().then(() => link.end({}));
      return () => {};
    }
    let opened = false;
    source.onopen = () => {
      opened = true;
      link.open();
    };
    const receive = (message) => link.event(parse(message.data));
    for (const type of EVENT_TYPES) source.addEventListener(type, receive);
    // EventSource would reconnect by itself, but by its own timing and without saying why it failed:
    // the client reconnects instead, with its cursor and back-off.
    source.onerror = () => {
      source.close();
      link.end({ opened: opened });
    };
    return () => source.close();
  }

  function openLongPoll(channel, after, link) {
    const controller = new AbortController();
    let opened = false;
    // The first request answers at once, so that the connection is known to work (and `onTransport`
    // called) without waiting for an event; the next ones are held until there is one.
    let seconds = 0;
    (async () => {
      for (;;) {
        const asked = Date.now();
        let answer;
        try {
          answer = await fetchJSON(url(channel.poll, { after: after(), timeout: seconds }), {
            headers: { Authorization: "Bearer " + channel.token },
            signal: controller.signal,
          });
        } catch (error) {
          return link.end({ opened: opened });
        }
        if (answer.status !== 200 || !answer.body || !Array.isArray(answer.body.events)) {
          return link.end({ opened: opened, status: answer.status, body: answer.body });
        }
        if (!opened) {
          opened = true;
          link.open();
        }
        answer.body.events.forEach(link.event);
        if (answer.body.done) return link.end({ opened: true, done: true });
        // An empty answer long before the timeout is the relay letting go (it is shutting down):
        // asking again at once would only find it going, so it counts as a drop.
        if (seconds > 0 && answer.body.events.length === 0 && Date.now() - asked < (seconds * 1000) / 2) {
          return link.end({ opened: true });
        }
        seconds = POLL_SECONDS;
      }
    })();
    return () => controller.abort();
  }

  const OPENERS = { websocket: openWebSocket, sse: openEventSource, poll: openLongPoll };

  function parse(text) {
    try {
      return JSON.parse(text);
    } catch (error) {
      return null;
    }
  }

  function available(channel, name) {
    if (name === "websocket") return typeof global.WebSocket === "function" && Boolean(channel.websocket);
    if (name === "sse") return typeof global.EventSource === "function" && Boolean(channel.events);
    return typeof global.fetch === "function" && Boolean(channel.poll);
  }

  // Waits on a session's channel and calls the handlers with its events, each seq once, until a
  // terminal event, an error no retry can mend, or `close()`.
  function wait(channel, handlers) {
    if (!channel || typeof channel.token !== "string" || typeof channel.poll !== "string") {
      throw new TypeError("LinkRelay.wait needs the channel object of the create answer");
    }
    handlers = handlers || {};
    const transports = TRANSPORTS.filter((name) => available(channel, name));
    if (transports.length === 0 || transports[transports.length - 1] !== "poll") {
      throw new TypeError("LinkRelay.wait needs fetch, to long-poll at least");
    }
    let index = 0; // the transport in use
    let cursor = 0; // the seq of the last event delivered
    let stopped = false;
    let attempts = 0; // failed connections in a row
    let refusals = 0; // openings in a row of a working transport that failed while the relay answered
    let current = null; // the connection open now: {name, ended, close}
    let timer = null;
    // The transports that work: they delivered an event, or stayed open, in this wait.
    const proven = {};

    function call(name, ...args) {
      const handler = handlers[name];
      if (typeof handler !== "function") return;
      try {
        handler(...args);
      } catch (error) {
        // A handler's bug is reported as uncaught, and does not stop the waiting.
        setTimeout(() => {
          throw error;
        });
      }
    }

    function stop() {
      stopped = true;
      clearTimeout(timer);
      if (current) {
        current.ended = true;
        current.close();
        current = null;
      }
    }

    function deliver(event, name) {
      if (stopped || !event || typeof event.seq !== "number" || event.seq <= cursor) return;
      cursor = event.seq;
      proven[name] = true;
      attempts = 0;
      call("onEvent", event);
      if (stopped) return;
      if (event.type === "tapped") call("onTapped", event);
      else if (event.type === "result") call("onResult", event.outcome, event);
      else if (event.type === "expired") call("onExpired", event);
      else if (event.type === "cancelled") call("onCancelled", event);
      if (TERMINAL.includes(event.type)) stop();
    }

    function fail(status, body) {
      if (stopped) return;
      stop();
      call("onError", errorFor(status, body, "The channel"));
    }

    function connect() {
      timer = null;
      if (stopped) return;
      const name = transports[index];
      const connection = { name: name, ended: false, openedAt: 0, close: () => {} };
      current = connection;
      connection.close = OPENERS[name](channel, () => cursor, {
        open() {
          if (connection.ended) return;
          connection.openedAt = Date.now();
          refusals = 0;
          call("onTransport", name);
        },
        event(event) {
          if (!connection.ended) deliver(event, name);
        },
        end(info) {
          if (connection.ended) return;
          connection.ended = true;
          current = null;
          if (!stopped) ended(name, info, connection);
        },
      });
    }

    function retry() {
      const delay = Math.min(BACKOFF_CAP, BACKOFF_BASE * 2 ** attempts) * (0.5 + Math.random() / 2);
      attempts += 1;
      timer = setTimeout(connect, delay);
    }

    // Why a connection ended decides what comes next: a long-poll knows the relay's status; a
    // WebSocket or an EventSource that never opened asks the long-poll endpoint once, because
    // browsers do not show the status of a refused upgrade or stream.
    function ended(name, info, connection) {
      if (info.done) return stop();
      if (connection.openedAt && Date.now() - connection.openedAt >= HEALTHY) {
        attempts = 0;
        proven[name] = true;
      }
      if (name === "poll") {
        if (isRefusal(info.status)) return fail(info.status, info.body);
        // No answer at all before the first poll: the relay may be down, or the browser refused the
        // request's CORS preflight (as it does for an origin the relay does not allow): the probe tells.
        if (!info.opened && !info.status) return probe(name);
        return retry();
      }
      if (info.opened && proven[name]) return retry(); // a drop, or 1012: resume on the same transport
      probe(name);
    }

    // Asks the long-poll endpoint once, at once, why a connection did not open. The probe is a request
    // the browser sends without a CORS preflight (a GET with the token in the query and no header of
    // its own), so that it reaches the relay even from an origin the relay refuses, whose 403 the page
    // can read; a preflight would fail there like a network error, and the client would retry for ever.
    async function probe(name) {
      let answer;
      try {
        answer = await fetchJSON(url(channel.poll, { token: channel.token, after: cursor, timeout: 0 }), {});
      } catch (error) {
        // The relay cannot be reached at all (it may be restarting): try the same transport later.
        if (!stopped) retry();
        return;
      }
      if (stopped) return;
      if (isRefusal(answer.status)) return fail(answer.status, answer.body);
      if (answer.status !== 200 || !answer.body || !Array.isArray(answer.body.events)) return retry();
      answer.body.events.forEach((event) => deliver(event, "probe"));
      if (stopped) return;
      if (answer.body.done) return stop();
      // The long-poll itself is the transport that did not open: the relay answers a plain GET but not
      // the transport's (its preflight may be refused on the way), so only a later try can help.
      if (name === "poll") return retry();
      // The relay answers, but this transport does not reach it (or, if it worked before, no longer
      // does, three times in a row): the next one, at once.
      if (proven[name] && ++refusals < 3) return retry();
      refusals = 0;
      index += 1;
      connect();
    }

    connect();
    return {
      close: stop,
      // The transport in use ("websocket", "sse" or "poll"), or null once stopped.
      get transport() {
        return stopped ? null : transports[index];
      },
    };
  }

  // Calls the session's finish hook with the channel's token; resolves to the relay's answer,
  // `{sessionId, state, done}` (`done` once the session has ended), or rejects with a LinkRelayError.
  // `session` is the session id or an object with `sessionId`; `options.redirectUrl` the URL that an
  // app or Prove's SDK received, when there is one.
  async function finish(session, channel, options) {
    options = options || {};
    if (!channel || typeof channel.token !== "string" || typeof channel.poll !== "string") {
      throw new TypeError("LinkRelay.finish needs the channel object of the create answer");
    }
    const target = new URL(channel.poll, global.location ? global.location.href : undefined);
    const parts = /^(.*\/)([^/]+)\/poll$/.exec(target.pathname);
    if (!parts) throw new TypeError("channel.poll is not a …/sessions/{id}/poll URL");
    const id = typeof session === "string" ? session : session && session.sessionId;
    if (id && id !== decodeURIComponent(parts[2])) {
      throw new TypeError("the session is not the channel's");
    }
    target.pathname = parts[1] + parts[2] + "/finish";
    target.search = "";
    target.hash = "";
    const headers = { Authorization: "Bearer " + channel.token };
    let body;
    if (options.redirectUrl !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify({ redirectUrl: options.redirectUrl });
    }
    let answer;
    try {
      answer = await fetchJSON(target.href, { method: "POST", headers, body, signal: options.signal });
    } catch (error) {
      if (error && error.name === "AbortError") throw error;
      throw new LinkRelayError("The relay could not be reached: " + error.message, 0, null);
    }
    if (answer.status !== 200 && answer.status !== 202) throw errorFor(answer.status, answer.body, "The finish hook");
    return Object.assign({}, answer.body, { done: answer.status === 200 });
  }

  const LinkRelay = Object.freeze({ wait: wait, finish: finish, LinkRelayError: LinkRelayError });
  global.LinkRelay = LinkRelay;
  if (typeof module === "object" && module && module.exports) module.exports = LinkRelay;
})(typeof globalThis !== "undefined" ? globalThis : this);
