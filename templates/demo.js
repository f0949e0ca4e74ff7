// The desktop side of the demo, on the relay's browser client (/v1/client.js): wait on the session's
// channel, show what happens, and stand in for Prove's Web SDK. The Nevis tab's page waits the same way
// and, once the result came, shows it with the user Nevis named (its server-side result form).
"use strict";
(function () {
  const root = document.getElementById("session");
  if (!root) return;
  const data = root.dataset;
  const channel = { token: data.token, websocket: data.websocket, events: data.events, poll: data.poll };
  const status = document.getElementById("status");
  const countdown = document.getElementById("countdown");
  const list = document.getElementById("events");
  const expiresAt = Date.parse(data.expiresAt);
  const next = document.getElementById("prefill-next");
  const nevisResult = document.getElementById("nevis-result");
  let done = false;
  let timer = null;

  // [status line, its style, the page's heading once the session has ended there]
  const words = {
    tapped: ["The link was tapped. Asking Prove for the result…", "", null],
    verified: ["Verified ✓", "verified", "Phone verified"],
    failed: ["Not verified", "failed", "Not verified"],
    possession_required: ["Prove asks for another possession check", "failed", "Not verified"],
    expired: ["The link expired before it was tapped", "expired", "Link expired"],
    cancelled: ["Cancelled", "cancelled", "Cancelled"],
  };
  if (data.flow === "nevis") {
    Object.assign(words, {
      tapped: ["The Access App has the request. Waiting for the answer…", "", null],
      verified: ["Verified ✓", "verified", "Approved"],
      failed: ["Not verified", "failed", "Not approved"],
      expired: ["The request expired before it was answered", "expired", "Request expired"],
    });
  }
  const hide = (id) => { const element = document.getElementById(id); if (element) element.hidden = true; };

  // Once the session has ended, the page stops asking for a tap: no instructions (nor QR code), no
  // countdown, no resend, finish or number change (each would only be refused now).
  function ended(heading) {
    done = true;
    clearTimeout(timer);
    for (const id of ["instructions", "time-left", "phone-link", "sdk"]) hide(id);
    if (heading) document.getElementById("heading").textContent = heading;
  }

  function say(key, ends) {
    const [text, style, heading] = words[key] || [key, "", null];
    status.textContent = text;
    status.className = "status " + style;
    if (ends) ended(heading);
  }

  function tick() {
    if (done) return;
    countdown.textContent = Math.max(0, Math.round((expiresAt - Date.now()) / 1000)) + " s";
    timer = setTimeout(tick, 1000);
  }
  tick();

  const transports = { websocket: "WebSocket", sse: "Server-Sent Events", poll: "long-poll" };
  LinkRelay.wait(channel, {
    onEvent(event) {
      const item = document.createElement("li");
      item.textContent = event.type + (event.outcome ? ": " + event.outcome : "") + " at " + event.at;
      list.appendChild(item);
    },
    onTapped() {
      say("tapped");
      // Pre-Fill: the phone has acted, so going on makes sense now.
      if (next) next.hidden = false;
    },
    onResult(outcome) {
      say(outcome, true);
      // Nevis: the result page names the user Nevis reported (a usernameless operation's only now).
      if (nevisResult) {
        status.textContent += " Getting the result…";
        nevisResult.submit();
        return;
      }
      // Pre-Fill: the customer's details come next, from the demo's own server-side form.
      if (!next) return;
      if (outcome === "verified") {
        status.textContent = "Verified ✓ Getting your details…";
        next.hidden = true;
        next.submit();
      } else {
        next.remove();
      }
    },
    onExpired() { say("expired", true); },
    onCancelled() { say("cancelled", true); },
    onError(error) { say("The channel answered " + error.status, true); },
    onTransport(name) { document.getElementById("transport").textContent = "Connected by " + transports[name]; },
  });

  // What Prove's client SDK would do on a real page: resend the link, take another number, and report
  // AuthFinish. The demo stands in for the SDK with the sandbox's own routes; a real page calls Prove's
  // Web SDK for the first two, and the relay's finish hook for the third, exactly as here. The Pre-Fill
  // page has none of them: the sandbox resends and changes numbers for Unify flows only.
  const note = document.getElementById("sdk-note");
  if (!note) return;
  async function act(label, url, body) {
    const response = await fetch(url, {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    note.textContent = label + ": " + (response.ok ? "done" : "refused (" + response.status + ")");
    return response.ok;
  }
  // As the sandbox phone's messages show a number: all but the last four digits hidden.
  const masked = (number) => number.length > 4 ? "*".repeat(number.length - 4) + number.slice(-4) : "*".repeat(number.length);
  let current = data.phone;
  document.getElementById("resend").addEventListener("click", () =>
    act("Resend", "/sandbox/resend?phoneNumber=" + encodeURIComponent(current)));
  document.getElementById("change").addEventListener("submit", async (event) => {
    event.preventDefault();
    const to = document.getElementById("to").value.trim();
    if (await act("Another number", "/sandbox/change-number", { from: current, to: to })) {
      current = to;
      document.getElementById("phone").textContent = masked(to);
      document.getElementById("phone-page").href = "/sandbox/phone?phoneNumber=" + encodeURIComponent(to);
    }
  });
  document.getElementById("finish").addEventListener("click", () =>
    LinkRelay.finish(data.session, channel).then(
      () => { note.textContent = "Finish: done"; },
      (error) => { note.textContent = "Finish: refused (" + error.status + ")"; }));
})();
