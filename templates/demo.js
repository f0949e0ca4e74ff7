// The desktop side of the demo, on the relay's browser client (/v1/client.js): wait on the session's
// channel, show what happens, and stand in for Prove's Web SDK.
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
  let done = false;

  const words = {
    tapped: ["The link was tapped. Asking Prove for the result…", ""],
    verified: ["Verified ✓", "verified"],
    failed: ["Not verified", "failed"],
    possession_required: ["Prove asks for another possession check", "failed"],
    expired: ["The link expired before it was tapped", "expired"],
    cancelled: ["Cancelled", "cancelled"],
  };
  function say(key, ends) {
    const [text, style] = words[key] || [key, ""];
    status.textContent = text;
    status.className = "status " + style;
    if (ends) done = true;
  }

  function tick() {
    countdown.textContent = Math.max(0, Math.round((expiresAt - Date.now()) / 1000)) + " s";
    if (!done) setTimeout(tick, 1000);
  }
  tick();

  const transports = { websocket: "WebSocket", sse: "Server-Sent Events", poll: "long-poll" };
  LinkRelay.wait(channel, {
    onEvent(event) {
      const item = document.createElement("li");
      item.textContent = event.type + (event.outcome ? ": " + event.outcome : "") + " at " + event.at;
      list.appendChild(item);
    },
    onTapped() { say("tapped"); },
    onResult(outcome) {
      say(outcome, true);
      // Pre-Fill: the customer's details come next, from the demo's own server-side form.
      if (!next) return;
      if (outcome === "verified") {
        status.textContent = "Verified ✓ Getting your details…";
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
  let current = data.phone;
  document.getElementById("resend").addEventListener("click", () =>
    act("Resend", "/sandbox/resend?phoneNumber=" + encodeURIComponent(current)));
  document.getElementById("change").addEventListener("submit", async (event) => {
    event.preventDefault();
    const to = document.getElementById("to").value.trim();
    if (await act("Another number", "/sandbox/change-number", { from: current, to: to })) {
      current = to;
      document.getElementById("phone").textContent = to;
      document.getElementById("phone-page").href = "/sandbox/phone?phoneNumber=" + encodeURIComponent(to);
    }
  });
  document.getElementById("finish").addEventListener("click", () =>
    LinkRelay.finish(data.session, channel).then(
      () => { note.textContent = "Finish: done"; },
      (error) => { note.textContent = "Finish: refused (" + error.status + ")"; }));
})();
