// The README's walkthrough with Node's built-in fetch (Debian's nodejs 20, no packages): the client
// matrix's Node client. Run by Tests/clients/test_matrix.py, which starts the relay and passes it in:
//
//   LINKRELAY_URL=http://127.0.0.1:PORT LINKRELAY_KEY=… LINKRELAY_OTHER_ORIGIN=http://… \
//   LINKRELAY_TRANSCRIPT=out.json node --test Tests/clients/node/walkthrough.test.mjs
//
// It writes the same transcript as walkthrough.py (step → {status, type, body, derived}), which the
// pytest side compares with expectations.json for every client; here each step's status, code, events
// and derived facts are asserted against the same table, so that `node --test` alone says what
// differs. Requests are sent as fetch sends them by default: a bodiless POST is
// `fetch(url, {method: "POST"})`.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, writeFileSync } from "node:fs";
import { randomBytes, randomInt } from "node:crypto";

const relay = process.env.LINKRELAY_URL;
const key = process.env.LINKRELAY_KEY;
const otherOrigin = process.env.LINKRELAY_OTHER_ORIGIN;
const transcriptPath = process.env.LINKRELAY_TRANSCRIPT;
const expected = JSON.parse(readFileSync(new URL("../expectations.json", import.meta.url)));
const PHONE = "2001004014";
const ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
const TERMINAL = new Set(["result", "expired", "cancelled"]);
const api = { Authorization: `Bearer ${key}` };

const transcript = { skipped: {} };

async function observe(response, derived = {}) {
  const text = await response.text();
  let body = null;
  try {
    body = JSON.parse(text);
  } catch {}
  const type = (response.headers.get("content-type") || "").split(";")[0].trim().toLowerCase() || null;
  return { status: response.status, type, body, derived, text };
}

function withQuery(url, params) {
  const target = new URL(url);
  for (const [name, value] of Object.entries(params)) target.searchParams.set(name, String(value));
  return target.href;
}

function eventName(event) {
  return `${event.seq}:${event.type}` + (event.type === "result" ? `:${event.outcome}` : "");
}

// An event stream read with fetch's body: `next()` gives the next event, or null at its end.
function eventStream(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = "";
  return {
    async next() {
      for (;;) {
        const end = buffer.search(/\r?\n\r?\n/);
        if (end >= 0) {
          const block = buffer.slice(0, end);
          buffer = buffer.slice(buffer.slice(end).match(/^\r?\n\r?\n/)[0].length + end);
          const data = block.split(/\r?\n/).filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart());
          if (data.length) return JSON.parse(data.join("\n"));
          continue;
        }
        const { value, done } = await reader.read();
        if (done) return null;
        buffer += value;
      }
    },
    cancel: () => reader.cancel(),
  };
}

async function step(name, action) {
  try {
    transcript[name] = await action();
  } catch (error) {
    transcript[name] = { error: `${error.name}: ${error.message}` };
  }
  return transcript[name];
}

function statusIs(name) {
  const seen = transcript[name];
  assert.ok(seen, `${name} was not reached`);
  assert.equal(seen.error, undefined, `${name} failed: ${seen.error}`);
  if (expected[name].status !== undefined) assert.equal(seen.status, expected[name].status, `${name}: ${seen.text}`);
  if (expected[name].code !== undefined) assert.equal(seen.body?.code, expected[name].code, `${name}: ${seen.text}`);
  if (expected[name].events !== undefined) assert.deepEqual(seen.events, expected[name].events, name);
  for (const [fact, value] of Object.entries(expected[name].derived || {})) {
    assert.deepEqual(seen.derived?.[fact], value, `${name}: ${fact}`);
  }
}

test("the README's walkthrough with Node's fetch", async (t) => {
  assert.ok(relay && key && otherOrigin, "LINKRELAY_URL, LINKRELAY_KEY and LINKRELAY_OTHER_ORIGIN name the relay");
  const idempotencyKey = `order-node-${randomBytes(4).toString("hex")}`;
  const createHeaders = { ...api, "Content-Type": "application/json", "Idempotency-Key": idempotencyKey };
  const createBody = JSON.stringify({ phoneNumber: PHONE });
  const created = await step("create", async () =>
    observe(await fetch(`${relay}/v1/sessions`, { method: "POST", headers: createHeaders, body: createBody })));
  try {
    assert.equal(created.status, 201, created.text);
    const { sessionId, channel } = created.body;
    await step("create_again", async () => {
      const answer = await observe(await fetch(`${relay}/v1/sessions`, { method: "POST", headers: createHeaders, body: createBody }));
      answer.derived = { sameSession: answer.body?.sessionId === sessionId };
      return answer;
    });

    // The desktop waits: an event stream, and the long-poll. Node 20 has no built-in WebSocket.
    const stream = eventStream(await fetch(withQuery(channel.events, { token: channel.token })));
    const streamed = [eventName(await stream.next())];
    if (typeof WebSocket === "undefined") transcript.skipped.wait_ws = `Node ${process.version} has no built-in WebSocket`;
    const polled = [];
    const poll = async (after, timeout) => {
      const response = await fetch(withQuery(channel.poll, { after, timeout, token: channel.token }));
      if (response.status !== 200) throw new Error(`long-poll answered ${response.status}: ${await response.text()}`);
      const body = await response.json();
      polled.push(...body.events.map(eventName));
      return body;
    };
    await poll(0, 5);

    // The phone: the newest SMS's link, followed through Prove's redirect (fetch follows by default).
    const outbox = await step("outbox", async () => observe(await fetch(`${relay}/sandbox/outbox?phoneNumber=${PHONE}`)));
    await step("tap", async () => {
      const response = await fetch(outbox.body.messages.at(-1).link);
      const landed = new URL(response.url);
      return observe(response, { landedWithAscTrue: landed.pathname.startsWith("/l/") && landed.searchParams.get("asc") === "true" });
    });
    await step("wait_sse", async () => {
      for (;;) {
        const event = await stream.next();
        if (event === null) break;
        streamed.push(eventName(event));
        if (TERMINAL.has(event.type)) break;
      }
      return { events: streamed, ended: (await stream.next()) === null };
    });
    await step("wait_poll", async () => {
      let after = polled.length;
      for (let round = 0; round < 10; round++) {
        const body = await poll(after, 25);
        after = body.after;
        if (body.done) return { events: polled, ended: true };
      }
      return { events: polled, ended: false };
    });

    await step("read", async () => observe(await fetch(`${relay}/v1/sessions/${sessionId}`, { headers: api })));
    const finish = `${relay}/v1/sessions/${sessionId}/finish`;
    await step("finish_ended_token", async () =>
      observe(await fetch(finish, { method: "POST", headers: { Authorization: `Bearer ${channel.token}` } })));
    await step("finish_ended_key", async () => observe(await fetch(finish, { method: "POST", headers: api })));

    // Another session, which waits: finish asks Prove (202), cancel ends it, a second cancel is a 409.
    const other = await (await fetch(`${relay}/v1/sessions`, {
      method: "POST", headers: { ...api, "Content-Type": "application/json" }, body: createBody })).json();
    transcript.sessions = [sessionId, other.sessionId];
    const base = `${relay}/v1/sessions/${other.sessionId}`;
    const wrong = "x".repeat(channel.token.length);
    await step("finish_waiting_token", async () =>
      observe(await fetch(`${base}/finish`, { method: "POST", headers: { Authorization: `Bearer ${other.channel.token}` } })));
    await step("finish_waiting_key", async () => observe(await fetch(`${base}/finish`, { method: "POST", headers: api })));
    await step("finish_wrong_token", async () =>
      observe(await fetch(`${base}/finish`, { method: "POST", headers: { Authorization: `Bearer ${wrong}` } })));
    await step("cancel", async () => observe(await fetch(`${base}/cancel`, { method: "POST", headers: api })));
    await step("cancel_again", async () => observe(await fetch(`${base}/cancel`, { method: "POST", headers: api })));

    // Refusals on the long-poll: a wrong token answers exactly as an unknown id does.
    let unknownId = "ses_";
    while (unknownId.length < sessionId.length) unknownId += ALPHABET[randomInt(ALPHABET.length)];
    let unknownHeaders = null;
    await step("poll_unknown", async () => {
      const response = await fetch(withQuery(channel.poll.replace(sessionId, unknownId), { token: wrong, timeout: 0 }));
      unknownHeaders = [...response.headers.keys()].filter((name) => name !== "date").sort();
      return observe(response);
    });
    await step("poll_wrong_token", async () => {
      const response = await fetch(withQuery(channel.poll, { token: wrong, timeout: 0 }));
      const names = [...response.headers.keys()].filter((name) => name !== "date").sort();
      const answer = await observe(response);
      const unknown = transcript.poll_unknown;
      answer.derived = {
        sameAsUnknown: answer.status === unknown.status && answer.text === unknown.text && answer.type === unknown.type
          && JSON.stringify(names) === JSON.stringify(unknownHeaders),
      };
      return answer;
    });
    await step("poll_no_token", async () => observe(await fetch(withQuery(channel.poll, { timeout: 0 }))));
    await step("refused_origin", async () => {
      const response = await fetch(withQuery(channel.poll, { token: channel.token, timeout: 0 }), { headers: { Origin: otherOrigin } });
      // fetch joins repeated headers with ", ": split them back into values.
      const allowOrigin = response.headers.get("access-control-allow-origin");
      return observe(response, { allowOrigin: allowOrigin === null ? [] : allowOrigin.split(/,\s*/) });
    });
  } finally {
    if (transcriptPath) writeFileSync(transcriptPath, JSON.stringify(transcript));
  }

  for (const name of Object.keys(expected)) {
    if (name.startsWith("_") || name === "webhooks" || name in transcript.skipped) continue;
    await t.test(name, () => statusIs(name));
  }
});
