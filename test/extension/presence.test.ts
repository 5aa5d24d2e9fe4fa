import { test } from "node:test";
import assert from "node:assert/strict";
import { Heartbeat } from "../../protocol/sessions.ts";
import {
  IDLE_LOOP,
  buildHeartbeat,
  currentTool,
  nextSend,
  noteActivity,
  runEdgeAction,
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
