import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SinkEnvelope } from "../../protocol/sink.ts";
import { createSinkClient, socketRefusal } from "../../extension/sink/client.ts";
import { startSinkListener } from "../../harness/sink-listener.ts";
import { buildSinkEnvelope, buildSinkPayload } from "../../extension/sink/payload-rules.ts";
import { createSinkQueue, SINK_QUEUE_CAPACITY } from "../../extension/sink/queue.ts";

const TOKEN = "a".repeat(64);

function socketIn(t: { after: (fn: () => void) => void }): string {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-sink-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "notify.sock");
}

const event = (n: number): SinkEnvelope =>
  buildSinkEnvelope("tool.started", "session-1", buildSinkPayload("tool.started", { run_id: "r", tool_call_id: `c${n}`, tool: "bash" }), new Date());
const callIds = (events: SinkEnvelope[]) => events.map((e) => (e.type === "tool.started" ? e.payload.tool_call_id : e.type));

/** A real listener on a temp socket and a client for it, both closed after the test. */
async function listenerAndClient(t: TestContext) {
  const socket = socketIn(t);
  const listener = await startSinkListener({ socket, token: TOKEN });
  const client = createSinkClient(socket);
  t.after(async () => {
    await client.destroy();
    await listener.close();
  });
  return { listener, client, socket };
}

test("events reach a real Unix-socket listener in order, with the bearer token", async (t) => {
  const { listener, client } = await listenerAndClient(t);
  const queue = createSinkQueue<SinkEnvelope>(async (e) => void (await client.post(e, TOKEN)));
  for (let n = 0; n < 5; n++) queue.push(event(n));
  await listener.waitFor((events) => events.length === 5);
  assert.deepEqual(callIds(listener.events), ["c0", "c1", "c2", "c3", "c4"]);
  assert.deepEqual(listener.rejected, []);
  await queue.close(1000);
});

test("a missing socket (app absent) is an outcome, not an exception", async (t) => {
  const client = createSinkClient(socketIn(t));
  t.after(() => client.destroy());
  const result = await client.post(event(1), TOKEN);
  assert.equal(result.ok, false);
  assert.equal(!result.ok && result.reason, "ENOENT");
});

test("a wrong token gets 401 from the listener and is reported as such", async (t) => {
  const { listener, client } = await listenerAndClient(t);
  assert.deepEqual(await client.post(event(1), "b".repeat(64)), { ok: false, status: 401, reason: "HTTP 401" });
  assert.deepEqual(listener.events, []);
  assert.deepEqual(await client.post(event(2), TOKEN), { ok: true, status: 204 });
});

test("a hung app times out per event instead of holding the worker forever", async (t) => {
  const socket = socketIn(t);
  const listener = await startSinkListener({ socket, token: TOKEN, answerDelayMs: Infinity });
  const client = createSinkClient(socket, 50);
  t.after(async () => {
    await client.destroy();
    await listener.close();
  });
  const result = await client.post(event(1), TOKEN);
  assert.equal(result.ok, false);
  assert.equal(listener.events.length, 1, "the app got it, it just never answered");
});

test("when the app falls behind, the queue keeps 256 and drops the oldest", async () => {
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const sent: string[] = [];
  const queue = createSinkQueue<SinkEnvelope>(async (e) => {
    await gate;
    sent.push(callIds([e])[0] ?? "");
  });
  const total = SINK_QUEUE_CAPACITY + 45;
  for (let n = 0; n < total; n++) queue.push(event(n));
  // The worker starts on the next turn: everything is still queued, minus what overflowed.
  assert.equal(queue.size, SINK_QUEUE_CAPACITY);
  assert.equal(queue.dropped, 45);
  await new Promise((resolve) => setImmediate(resolve));
  release();
  await queue.close(60_000);
  assert.equal(sent.length, SINK_QUEUE_CAPACITY);
  assert.equal(sent[0], "c45", "the oldest went first");
  assert.equal(sent.at(-1), `c${total - 1}`, "the newest state survives");
});

test("close gives up on a hung app after its drain budget and discards the rest", async () => {
  const queue = createSinkQueue<SinkEnvelope>(() => new Promise(() => {}));
  for (let n = 0; n < 10; n++) queue.push(event(n));
  await new Promise((resolve) => setImmediate(resolve));
  await queue.close(10);
  assert.equal(queue.size, 0);
  assert.equal(queue.dropped, 9, "one was in flight, nine never left");
  queue.push(event(99));
  assert.equal(queue.size, 0, "a closed queue takes nothing");
});

test("a send that throws loses that event only; the worker goes on", async () => {
  const sent: SinkEnvelope[] = [];
  let calls = 0;
  const queue = createSinkQueue<SinkEnvelope>(async (e) => {
    if (calls++ === 0) throw new Error("boom");
    sent.push(e);
  });
  for (let n = 0; n < 3; n++) queue.push(event(n));
  await queue.close(60_000);
  assert.deepEqual(callIds(sent), ["c1", "c2"]);
});

test("the token goes only to a socket owned by this user and writable by nobody else; otherwise the client says why", async (t) => {
  const { listener, client, socket } = await listenerAndClient(t);
  chmodSync(socket, 0o777);
  const open = await client.post(event(1), TOKEN);
  assert.equal(open.ok, false);
  assert.match(!open.ok ? open.reason : "", /writable by group or others \(mode 777\): token not sent/);
  assert.equal(listener.events.length + listener.rejected.length, 0, "nothing reached the socket");
  chmodSync(socket, 0o600);
  assert.deepEqual(await client.post(event(2), TOKEN), { ok: true, status: 204 });

  const link = `${socket}.link`;
  symlinkSync(socket, link);
  const linked = createSinkClient(link);
  t.after(() => linked.destroy());
  const viaLink = await linked.post(event(3), TOKEN);
  assert.match(!viaLink.ok ? viaLink.reason : "", /not a socket/);

  const uid = process.getuid!();
  const stats = (isSocket: boolean, owner: number, mode: number) => ({ isSocket: () => isSocket, uid: owner, mode });
  const table: [ReturnType<typeof stats>, RegExp | null][] = [
    [stats(true, uid, 0o140755), null],
    [stats(true, uid, 0o140700), null],
    [stats(true, uid + 1, 0o140700), /belongs to uid/],
    [stats(true, uid, 0o140775), /writable by group/],
    [stats(true, uid, 0o140757), /writable by group or others/],
    [stats(false, uid, 0o100600), /not a socket/],
  ];
  for (const [given, expected] of table) {
    const refusal = socketRefusal(given, uid);
    if (expected) assert.match(refusal ?? "", expected);
    else assert.equal(refusal, null);
  }
});
