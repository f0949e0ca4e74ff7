// The desktop side of the demo: wait on the session's channel and show what happens.
"use strict";
(function () {
  const root = document.getElementById("session");
  if (!root) return;
  const status = document.getElementById("status");
  const countdown = document.getElementById("countdown");
  const list = document.getElementById("events");
  const token = root.dataset.token;
  const expiresAt = Date.parse(root.dataset.expiresAt);
  let cursor = 0;
  let done = false;

  const words = {
    waiting: ["Waiting for the tap…", ""],
    tapped: ["The link was tapped. Asking Prove for the result…", ""],
    verified: ["Verified ✓", "verified"],
    failed: ["Not verified", "failed"],
    possession_required: ["Prove asks for another possession check", "failed"],
    expired: ["The link expired before it was tapped", "expired"],
    cancelled: ["Cancelled", "cancelled"],
  };

  function show(event) {
    if (event.seq <= cursor) return;
    cursor = event.seq;
    const key = event.type === "result" ? event.outcome : event.type;
    const [text, cls] = words[key] || [key, ""];
    status.textContent = text;
    status.className = "status " + cls;
    const item = document.createElement("li");
    item.textContent = event.type + (event.outcome ? ": " + event.outcome : "") + " at " + event.at;
    list.appendChild(item);
    if (["result", "expired", "cancelled"].includes(event.type)) done = true;
  }

  function tick() {
    const left = Math.max(0, Math.round((expiresAt - Date.now()) / 1000));
    countdown.textContent = left + " s";
    if (!done) setTimeout(tick, 1000);
  }
  tick();

  // Long-poll is the fallback when a WebSocket cannot be opened or drops.
  async function poll() {
    while (!done) {
      try {
        const response = await fetch(root.dataset.poll + "?after=" + cursor + "&timeout=25", {
          headers: { Authorization: "Bearer " + token },
        });
        if (!response.ok) { status.textContent = "The channel answered " + response.status; return; }
        const answer = await response.json();
        answer.events.forEach(show);
        if (answer.done) done = true;
      } catch (error) {
        await new Promise((resolve) => setTimeout(resolve, 1000 + Math.random() * 4000));
      }
    }
  }

  // The WebSocket; when the relay restarts (1012), goes away (1001) or the connection drops, it comes
  // back after a random delay that grows with each failed try (RFC 6455 §7.2.3), so that a restart is
  // not met by every browser at once, and resumes after the last event it showed.
  let attempts = 0;
  function connect() {
    let socket;
    let opened = false;
    try {
      socket = new WebSocket(root.dataset.websocket + "?after=" + cursor + "&token=" + encodeURIComponent(token));
    } catch (error) {
      poll();
      return;
    }
    socket.onopen = () => { opened = true; attempts = 0; };
    socket.onmessage = (message) => show(JSON.parse(message.data));
    socket.onclose = () => {
      if (done) return;
      if (!opened && attempts === 0) { poll(); return; }  // no WebSocket from here: long-poll instead
      attempts += 1;
      setTimeout(connect, Math.random() * Math.min(30000, 5000 * 2 ** (attempts - 1)));
    };
  }
  connect();

  // What Prove's client SDK would do on a real page: resend the link, take another number, and report
  // AuthFinish. The demo stands in for the SDK with the sandbox's own routes; a real page calls Prove's
  // Web SDK for the first two, and the relay's finish hook for the third, exactly as here.
  const note = document.getElementById("sdk-note");
  async function act(label, url, body) {
    const response = await fetch(url, {
      method: "POST", headers: { Authorization: "Bearer " + token, "Content-Type": "application/json" },
      body: body ? JSON.stringify(body) : undefined,
    });
    note.textContent = label + ": " + (response.ok ? "done" : "refused (" + response.status + ")");
    return response.ok;
  }
  const phone = root.dataset.phone;
  let current = phone;
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
    act("Finish", root.dataset.finish));
})();
