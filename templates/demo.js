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
        await new Promise((resolve) => setTimeout(resolve, 2000));
      }
    }
  }

  let socket;
  try {
    socket = new WebSocket(root.dataset.websocket + "?token=" + encodeURIComponent(token));
  } catch (error) {
    poll();
    return;
  }
  socket.onmessage = (message) => show(JSON.parse(message.data));
  socket.onclose = () => { if (!done) poll(); };
})();
