import { test } from "node:test";
import assert from "node:assert/strict";
import { SINK_TEXT_CHARS, SinkEnvelope, SinkEventType, SinkPayloads } from "../../protocol/sink.ts";
import { buildSinkEnvelope, buildSinkPayload, formatSinkError, truncateSinkText } from "../../extension/sink/payload-rules.ts";

test("texts are cut to 500 characters with a visible mark, never inside a surrogate pair", () => {
  const cases: [string, string][] = [
    ["short", "short"],
    ["a".repeat(SINK_TEXT_CHARS), "a".repeat(SINK_TEXT_CHARS)],
    ["a".repeat(SINK_TEXT_CHARS + 1), `${"a".repeat(SINK_TEXT_CHARS)}…`],
    ["好".repeat(40_000), `${"好".repeat(SINK_TEXT_CHARS)}…`],
    ["😀".repeat(SINK_TEXT_CHARS), "😀".repeat(SINK_TEXT_CHARS)],
    ["😀".repeat(SINK_TEXT_CHARS + 3), `${"😀".repeat(SINK_TEXT_CHARS)}…`],
  ];
  for (const [input, expected] of cases) assert.equal(truncateSinkText(input), expected);
});

test("errors travel as 'Type: message' strings", () => {
  assert.equal(formatSinkError("ModelError", "503 overloaded"), "ModelError: 503 overloaded");
  assert.equal(formatSinkError("ModelError", "  "), "ModelError: (no message)");
  assert.equal(formatSinkError("ModelError", undefined), "ModelError: (no message)");
  assert.match(formatSinkError("ModelError", "x".repeat(2000)), /^ModelError: x+…$/);
});

// Everything a run knows that must never leave through the sink, whatever the event.
const forbidden = {
  tool_output: "secret tool output",
  file_contents: "SECRET FILE",
  history: [{ role: "user", content: "old" }],
  messages: [{ role: "assistant", content: "full reply" }],
  full_reply: "the whole reply",
  exception_type: "ValueError",
  args: { path: "/etc/passwd" },
  result: { content: [{ type: "text", text: "output" }] },
  cwd: "/home/me/secret-project",
};

const required: Record<SinkEventType, Record<string, unknown>> = {
  "run.started": { run_id: "r1", prompt: "fix it" },
  "run.completed": { run_id: "r1", had_response: true, answer: "done" },
  "run.failed": { run_id: "r1", error: "ModelError: boom" },
  "run.cancelled": { run_id: "r1" },
  "tool.started": { run_id: "r1", tool_call_id: "c1", tool: "bash" },
  "tool.completed": { run_id: "r1", tool_call_id: "c1", tool: "bash", ok: false },
};

test("every payload is whitelisted: tool output, file contents, history and the full reply never pass", () => {
  for (const type of SinkEventType.options) {
    const payload = buildSinkPayload(type, { ...forbidden, ...required[type] });
    const allowed = Object.keys(SinkPayloads[type].shape);
    for (const key of Object.keys(payload)) assert.ok(allowed.includes(key), `${type} leaked ${key}`);
    for (const key of Object.keys(forbidden)) assert.equal(key in payload, false, `${type} carries ${key}`);
    assert.deepEqual(payload, required[type]);
  }
});

test("a missing fact stays missing (unknown), while a real zero is kept", () => {
  const unknown = buildSinkPayload("run.completed", { run_id: "r", had_response: false, duration_seconds: undefined, answer: null, agent_name: "" });
  assert.deepEqual(unknown, { run_id: "r", had_response: false });
  const zero = buildSinkPayload("tool.completed", { run_id: "r", tool_call_id: "c", tool: "t", ok: true, duration_seconds: 0 });
  assert.equal(zero.duration_seconds, 0);
});

test("prompt, answer and error are truncated inside the payload", () => {
  const long = "字".repeat(1000);
  assert.equal(buildSinkPayload("run.started", { run_id: "r", prompt: long }).prompt, `${"字".repeat(500)}…`);
  assert.equal(buildSinkPayload("run.completed", { run_id: "r", had_response: true, answer: long }).answer, `${"字".repeat(500)}…`);
  assert.equal(buildSinkPayload("run.failed", { run_id: "r", error: long }).error, `${"字".repeat(500)}…`);
});

test("a payload missing a required fact is a bug and throws", () => {
  assert.throws(() => buildSinkPayload("run.failed", { run_id: "r" }));
  assert.throws(() => buildSinkPayload("tool.completed", { run_id: "r", tool_call_id: "c", tool: "t" }));
});

test("the envelope stamps its own ts, distinct from answered_at", () => {
  const payload = buildSinkPayload("run.completed", { run_id: "r", had_response: true, answer: "ok", answered_at: "2026-11-30T03:00:00.000Z" });
  const envelope = buildSinkEnvelope("run.completed", "019a-session", payload, new Date("2026-11-30T03:05:00.000Z"));
  assert.deepEqual(envelope, {
    type: "run.completed",
    ts: "2026-11-30T03:05:00.000Z",
    session_id: "019a-session",
    payload: { run_id: "r", had_response: true, answer: "ok", answered_at: "2026-11-30T03:00:00.000Z" },
  });
  assert.ok(SinkEnvelope.safeParse(envelope).success);
  assert.equal(SinkEnvelope.safeParse({ ...envelope, type: "needs.approval" }).success, false);
});
