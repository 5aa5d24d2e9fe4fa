import { test } from "node:test";
import assert from "node:assert/strict";
import { Heartbeat } from "../../protocol/sessions.ts";
import {
  CLOSED_STREAM,
  IDLE_LOOP,
  STREAM_RETRY_FIRST_MS,
  STREAM_RETRY_MAX_MS,
  beatIntervalMs,
  buildHeartbeat,
  heartbeatWay,
  shouldOpenStream,
  streamChanged,
  type StreamLink,
  type StreamSignal,
  currentTool,
  nextSend,
  noteActivity,
  runEdgeAction,
  sendQuiet,
  type Activity,
  type SendLoop,
  type SendTrigger,
} from "../../extension/presence/decisions.ts";
import { createRuntimeId } from "../../extension/presence/presence.ts";
import { projectName } from "../../extension/session/label-rules.ts";

test("the send loop keeps at most one request in flight and sends the newest state once after it", () => {
  const rows: { from: SendLoop; trigger: SendTrigger; to: SendLoop; send: boolean }[] = [
    { from: IDLE_LOOP, trigger: "due", to: { inFlight: true, resend: false }, send: true },
    { from: { inFlight: true, resend: false }, trigger: "due", to: { inFlight: true, resend: true }, send: false },
    { from: { inFlight: true, resend: true }, trigger: "due", to: { inFlight: true, resend: true }, send: false },
    { from: { inFlight: true, resend: true }, trigger: "finished", to: { inFlight: true, resend: false }, send: true },
    { from: { inFlight: true, resend: false }, trigger: "finished", to: IDLE_LOOP, send: false },
  ];
  for (const row of rows) {
    assert.deepEqual(nextSend(row.from, row.trigger), { loop: row.to, send: row.send }, JSON.stringify(row));
  }
});

test("a burst of urgent heartbeats during one request costs exactly one follow-up request", () => {
  let loop = IDLE_LOOP;
  let sends = 0;
  const apply = (trigger: SendTrigger) => {
    const next = nextSend(loop, trigger);
    loop = next.loop;
    if (next.send) sends++;
  };
  apply("due");
  for (let i = 0; i < 10; i++) apply("due");
  apply("finished");
  apply("finished");
  assert.equal(sends, 2);
  assert.deepEqual(loop, IDLE_LOOP);
});

test("a run start is sent at once unless the server already heard running; a settle waits, unless it already heard idle", () => {
  const rows = [
    { edge: "started", heard: undefined, action: "send" },
    { edge: "started", heard: "idle", action: "send" },
    { edge: "started", heard: "running", action: "none" },
    { edge: "settled", heard: undefined, action: "settle" },
    { edge: "settled", heard: "running", action: "settle" },
    { edge: "settled", heard: "idle", action: "none" },
  ] as const;
  for (const row of rows) assert.equal(runEdgeAction(row.edge, row.heard), row.action, JSON.stringify(row));
});

test("activity moves only on model output and tool start or end, and names the newest running tool", () => {
  let activity: Activity = { lastActivityAt: 1_000, runningTools: new Map() };
  activity = noteActivity(activity, { kind: "tool_start", toolCallId: "a", toolName: "bash" }, 2_000);
  assert.equal(activity.lastActivityAt, 2_000);
  assert.equal(currentTool(activity), "bash");
  activity = noteActivity(activity, { kind: "tool_start", toolCallId: "b", toolName: "read" }, 3_000);
  assert.equal(currentTool(activity), "read");
  activity = noteActivity(activity, { kind: "tool_end", toolCallId: "b" }, 4_000);
  assert.equal(currentTool(activity), "bash");
  activity = noteActivity(activity, { kind: "tool_end", toolCallId: "a" }, 5_000);
  assert.equal(currentTool(activity), null);
  activity = noteActivity(activity, { kind: "model_output" }, 6_000);
  assert.equal(activity.lastActivityAt, 6_000);
});

test("the project is a basename, never a path", () => {
  const rows: [string, string][] = [
    ["/home/me/work/my-project", "my-project"],
    ["/home/me/work/my-project/", "my-project"],
    ["C:\\Users\\me\\proj", "proj"],
    ["/", "root"],
  ];
  for (const [cwd, expected] of rows) assert.equal(projectName(cwd), expected, cwd);
});

test("a heartbeat declares protocol 2, the real state and image support from the model", () => {
  const base = {
    sessionId: "019a-session",
    runtimeId: createRuntimeId(),
    cwd: "/tmp/demo/app",
    state: "running" as const,
    activity: { lastActivityAt: Date.parse("2026-11-30T03:00:00.000Z"), runningTools: new Map([["t1", "bash"]]) },
  };
  const vision = buildHeartbeat({ ...base, model: { provider: "faux", id: "faux-1", input: ["text", "image"] } });
  assert.deepEqual(Heartbeat.parse(vision), vision);
  assert.equal(vision.command_protocol, 3);
  assert.equal(vision.state, "running");
  assert.equal(vision.supports_images, true);
  assert.equal(vision.model, "faux/faux-1");
  assert.equal(vision.project, "app");
  assert.equal(vision.activity, "bash");
  assert.equal(vision.last_activity_at, "2026-11-30T03:00:00.000Z");

  const textOnly = buildHeartbeat({ ...base, model: { provider: "faux", id: "t", input: ["text"] } });
  assert.equal(textOnly.supports_images, false);
  const noModel = buildHeartbeat({ ...base, model: undefined });
  assert.equal(noModel.model, null);
  assert.equal(noModel.supports_images, false);
});

test("runtime ids are valid wire ids and differ per runtime", () => {
  const a = createRuntimeId();
  const b = createRuntimeId();
  assert.notEqual(a, b);
  assert.match(a, /^[A-Za-z0-9._:-]{1,128}$/);
});

test("the presence stream: used only while open, opened when offered and due, retried after a loss with a bounded backoff", () => {
  const offered: StreamLink = { ...CLOSED_STREAM, offered: true };
  const rows: { name: string; from: StreamLink; signal: StreamSignal; to: StreamLink; way: "stream" | "http"; openAt1000: boolean }[] = [
    { name: "an old server's answer", from: CLOSED_STREAM, signal: { kind: "http_answer", offered: false }, to: CLOSED_STREAM, way: "http", openAt1000: false },
    { name: "a new server's answer", from: CLOSED_STREAM, signal: { kind: "http_answer", offered: true }, to: offered, way: "http", openAt1000: true },
    { name: "opening: HTTP meanwhile", from: offered, signal: { kind: "opening" }, to: { ...offered, state: "opening" }, way: "http", openAt1000: false },
    { name: "opened", from: { ...offered, state: "opening" }, signal: { kind: "opened" }, to: { ...offered, state: "open" }, way: "stream", openAt1000: false },
    {
      name: "an answer over it clears the failures",
      from: { ...offered, state: "open", failures: 3, retryAtMs: 900 },
      signal: { kind: "answered", beat: { state: "idle" }, quietBeats: false, ttlMs: 30_000, nowMs: 100 },
      to: { ...offered, state: "open", failures: 0, retryAtMs: 900 },
      way: "stream",
      openAt1000: false,
    },
    {
      name: "an answer that says quiet_beats: what it accepted may go quiet for one TTL",
      from: { ...offered, state: "open" },
      signal: { kind: "answered", beat: { state: "idle", activity: null }, quietBeats: true, ttlMs: 30_000, nowMs: 100 },
      to: { ...offered, state: "open", quiet: { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } },
      way: "stream",
      openAt1000: false,
    },
    {
      name: "a refusal: answered heartbeats again",
      from: { ...offered, state: "open", quiet: { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } },
      signal: { kind: "refused" },
      to: { ...offered, state: "open" },
      way: "stream",
      openAt1000: false,
    },
    {
      name: "a loss forgets what the stream accepted",
      from: { ...offered, state: "open", quiet: { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } },
      signal: { kind: "lost", nowMs: 0 },
      to: { ...offered, failures: 1, retryAtMs: STREAM_RETRY_FIRST_MS },
      way: "http",
      openAt1000: true,
    },
    {
      name: "a new stream starts with answered heartbeats",
      from: { ...offered, quiet: { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } },
      signal: { kind: "opening" },
      to: { ...offered, state: "opening" },
      way: "http",
      openAt1000: false,
    },
    {
      name: "the first loss waits 1 s",
      from: { ...offered, state: "open" },
      signal: { kind: "lost", nowMs: 500 },
      to: { ...offered, failures: 1, retryAtMs: 500 + STREAM_RETRY_FIRST_MS },
      way: "http",
      openAt1000: false,
    },
    {
      name: "a failed open after two losses waits 4 s",
      from: { ...offered, state: "opening", failures: 2 },
      signal: { kind: "lost", nowMs: 0 },
      to: { ...offered, failures: 3, retryAtMs: 4 * STREAM_RETRY_FIRST_MS },
      way: "http",
      openAt1000: false,
    },
    {
      name: "many losses wait at most a minute",
      from: { ...offered, state: "opening", failures: 30 },
      signal: { kind: "lost", nowMs: 0 },
      to: { ...offered, failures: 31, retryAtMs: STREAM_RETRY_MAX_MS },
      way: "http",
      openAt1000: false,
    },
    {
      name: "an answer that no longer offers it: HTTP, not reopened",
      from: { ...offered, failures: 1, retryAtMs: 0 },
      signal: { kind: "http_answer", offered: false },
      to: { ...CLOSED_STREAM, failures: 1 },
      way: "http",
      openAt1000: false,
    },
  ];
  for (const row of rows) {
    const to = streamChanged(row.from, row.signal);
    assert.deepEqual(to, row.to, row.name);
    assert.equal(heartbeatWay(to), row.way, row.name);
    assert.equal(shouldOpenStream(to, 1_000), row.openAt1000, row.name);
  }
});

test("a heartbeat goes quiet only over the open stream, saying what its newest answer accepted, within one TTL of it", () => {
  const basis = { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } as const;
  const open: StreamLink = { ...CLOSED_STREAM, offered: true, state: "open", quiet: basis };
  const idle = { state: "idle", activity: null } as const;
  const rows: { name: string; link: StreamLink; beat: Pick<Heartbeat, "state" | "activity">; nowMs: number; quiet: boolean }[] = [
    { name: "a periodic beat of the accepted state", link: open, beat: idle, nowMs: 10_100, quiet: true },
    { name: "activity absent reads as none", link: open, beat: { state: "idle" }, nowMs: 10_100, quiet: true },
    { name: "idle → running: answered (the server must accept it)", link: open, beat: { state: "running", activity: null }, nowMs: 10_100, quiet: false },
    {
      name: "running → idle: answered (the idle long poll waits for it)",
      link: { ...open, quiet: { ...basis, state: "running" } },
      beat: idle,
      nowMs: 10_100,
      quiet: false,
    },
    { name: "a new activity: answered", link: open, beat: { state: "idle", activity: "bash" }, nowMs: 10_100, quiet: false },
    { name: "one TTL after the last answer: answered (a stalled stream is found)", link: open, beat: idle, nowMs: 30_100, quiet: false },
    {
      name: "no answer that offered quiet beats (first beat, after a refusal or an old server)",
      link: { ...open, quiet: undefined },
      beat: idle,
      nowMs: 10_100,
      quiet: false,
    },
    { name: "the stream not open: HTTP, answered", link: { ...open, state: "closed" }, beat: idle, nowMs: 10_100, quiet: false },
  ];
  for (const row of rows) assert.equal(sendQuiet(row.link, row.beat, row.nowMs), row.quiet, row.name);
});

test("the timer beats every half TTL only over an open stream whose newest answer offered quiet beats, never more often than configured", () => {
  const basis = { state: "idle", activity: null, untilMs: 30_100, ttlMs: 30_000 } as const;
  const open: StreamLink = { ...CLOSED_STREAM, offered: true, state: "open", quiet: basis };
  const rows: { name: string; link: StreamLink; configuredMs: number; intervalMs: number }[] = [
    { name: "an open stream with quiet beats: half the TTL", link: open, configuredMs: 10_000, intervalMs: 15_000 },
    { name: "a TTL that is not even: rounded down", link: { ...open, quiet: { ...basis, ttlMs: 30_001 } }, configuredMs: 10_000, intervalMs: 15_000 },
    { name: "a configured interval longer than half the TTL stays", link: open, configuredMs: 20_000, intervalMs: 20_000 },
    { name: "a short TTL never beats faster than configured", link: { ...open, quiet: { ...basis, ttlMs: 8_000 } }, configuredMs: 10_000, intervalMs: 10_000 },
    { name: "the server's TTL, not the default", link: { ...open, quiet: { ...basis, ttlMs: 60_000 } }, configuredMs: 10_000, intervalMs: 30_000 },
    {
      name: "no answer that offered quiet beats yet (first frame, old server, after a refusal)",
      link: { ...open, quiet: undefined },
      configuredMs: 10_000,
      intervalMs: 10_000,
    },
    { name: "HTTP: the stream is closed", link: { ...open, state: "closed" }, configuredMs: 10_000, intervalMs: 10_000 },
    { name: "HTTP: the stream is still opening", link: { ...open, state: "opening" }, configuredMs: 10_000, intervalMs: 10_000 },
  ];
  for (const row of rows) assert.equal(beatIntervalMs(row.link, row.configuredMs), row.intervalMs, row.name);
});

test("the interval in effect follows the stream: longer once an answer offers quiet beats, configured again at once when it is refused or lost", () => {
  const configuredMs = 10_000;
  let link: StreamLink = { ...CLOSED_STREAM, offered: true };
  const steps: { signal: StreamSignal; intervalMs: number }[] = [
    { signal: { kind: "opening" }, intervalMs: 10_000 },
    { signal: { kind: "opened" }, intervalMs: 10_000 },
    { signal: { kind: "answered", beat: { state: "idle" }, quietBeats: true, ttlMs: 30_000, nowMs: 0 }, intervalMs: 15_000 },
    { signal: { kind: "refused" }, intervalMs: 10_000 },
    { signal: { kind: "answered", beat: { state: "idle" }, quietBeats: true, ttlMs: 30_000, nowMs: 20_000 }, intervalMs: 15_000 },
    { signal: { kind: "lost", nowMs: 30_000 }, intervalMs: 10_000 },
    { signal: { kind: "http_answer", offered: true }, intervalMs: 10_000 },
    { signal: { kind: "opening" }, intervalMs: 10_000 },
    { signal: { kind: "opened" }, intervalMs: 10_000 },
    { signal: { kind: "answered", beat: { state: "idle" }, quietBeats: false, ttlMs: 30_000, nowMs: 40_000 }, intervalMs: 10_000 },
  ];
  for (const [index, step] of steps.entries()) {
    link = streamChanged(link, step.signal);
    assert.equal(beatIntervalMs(link, configuredMs), step.intervalMs, `step ${index}: ${step.signal.kind}`);
  }
});
