import { test } from "node:test";
import assert from "node:assert/strict";
import { AckBody, ClaimedCommand, ClaimQuery, CommandImage } from "../../protocol/queue.ts";
import { ContextUsage, EventBody } from "../../protocol/events.ts";
import { Heartbeat, HeartbeatAnswer } from "../../protocol/sessions.ts";
import { endpointUrl } from "../../protocol/wire.ts";

const validEvent = {
  event_id: "pi:019a:run:7",
  session_id: "019a",
  source: "Pi Agent · demo",
  task: "fix the tests",
  status: "completed",
  summary: "done",
  created_at: "2026-11-30T03:00:00.000Z",
};

test("endpointUrl replaces the last segment and drops the query", () => {
  const cases: [string, string, string][] = [
    ["http://127.0.0.1:5140/api/agent-notify/v1/events", "sessions/heartbeat", "http://127.0.0.1:5140/api/agent-notify/v1/sessions/heartbeat"],
    ["https://h.example/x/api/agent-notify/v1/events?a=1", "/commands", "https://h.example/x/api/agent-notify/v1/commands"],
    ["http://[::1]:9/api/agent-notify/v1/events", "health", "http://[::1]:9/api/agent-notify/v1/health"],
  ];
  for (const [endpoint, path, expected] of cases) assert.equal(endpointUrl(endpoint, path), expected);
});

test("context_usage follows the null rules of the specification", () => {
  const cases: [unknown, boolean][] = [
    [{ used_tokens: 48000, context_window: 200000, percent: 24 }, true],
    [{ used_tokens: null, context_window: 200000, percent: null }, true],
    [{ used_tokens: 250000, context_window: 200000, percent: 125 }, true],
    [{ used_tokens: null, context_window: 200000, percent: 24 }, false],
    [{ used_tokens: 1, context_window: 200000, percent: null }, false],
    [{ used_tokens: -1, context_window: 200000, percent: 0 }, false],
    [{ used_tokens: 1.5, context_window: 200000, percent: 0 }, false],
    [{ used_tokens: 1, context_window: 0, percent: 0 }, false],
    [{ used_tokens: 1, context_window: 200000, percent: Number.POSITIVE_INFINITY }, false],
    [{ used_tokens: 1, context_window: 200000, percent: 0, extra: 1 }, false],
    [{ used_tokens: 1, context_window: 200000 }, false],
    [{ used_tokens: Number.MAX_SAFE_INTEGER + 1, context_window: 200000, percent: 1 }, false],
  ];
  for (const [value, ok] of cases) assert.equal(ContextUsage.safeParse(value).success, ok, JSON.stringify(value));
});

test("an event without optional keys gets the protocol defaults", () => {
  const parsed = EventBody.parse(validEvent);
  assert.equal(parsed.delivery, "anon");
  assert.equal(parsed.context_usage, null);
  assert.equal(parsed.details, null);
  assert.equal(parsed.url, null);
});

test("events reject unknown keys, over-long fields and non-http urls", () => {
  const bad: Record<string, unknown>[] = [
    { ...validEvent, recipient: "123" },
    { ...validEvent, task: "x".repeat(201) },
    { ...validEvent, summary: "x".repeat(1201) },
    { ...validEvent, source: "x".repeat(121) },
    { ...validEvent, url: "javascript:alert(1)" },
    { ...validEvent, details: { blob: "x".repeat(5000) } },
    { ...validEvent, event_id: "has space" },
    { ...validEvent, status: "cancelled" },
    { ...validEvent, created_at: "yesterday" },
  ];
  for (const body of bad) assert.equal(EventBody.safeParse(body).success, false, JSON.stringify(body).slice(0, 80));
});

test("heartbeats carry a basename, never a path", () => {
  const beat = {
    session_id: "s1",
    runtime_id: "r1",
    project: "demo",
    model: null,
    state: "idle",
    supports_images: true,
    command_protocol: 2,
    last_activity_at: "2026-11-30T03:00:00.000Z",
  };
  assert.equal(Heartbeat.safeParse(beat).success, true);
  assert.equal(Heartbeat.safeParse({ ...beat, project: "/home/me/demo" }).success, false);
});

test("images are raw base64 with a known mime type", () => {
  assert.equal(CommandImage.safeParse({ mime_type: "image/png", data: "iVBORw0KGgo=" }).success, true);
  assert.equal(CommandImage.safeParse({ mime_type: "image/png", data: "data:image/png;base64,iVBORw0KGgo=" }).success, false);
  assert.equal(CommandImage.safeParse({ mime_type: "image/svg+xml", data: "PHN2Zz4=" }).success, false);
});

test("protocol 3 stays readable both ways: answers with unknown keys, claims without kind, requests without lane or outcome", () => {
  const answer = { ttl_ms: 30000, server_time: "2026-11-30T03:00:00.000Z" };
  assert.equal(HeartbeatAnswer.parse(answer).command_protocol, undefined, "a protocol-2 server's answer");
  assert.equal(HeartbeatAnswer.parse({ ...answer, command_protocol: 3 }).command_protocol, 3);
  assert.equal(HeartbeatAnswer.safeParse({ ...answer, command_protocol: 3, added_later: true }).success, true, "keys a client does not know are ignored");

  const claimed = { command_id: "c-1", event_id: "e-1", origin: "anon", instruction: "hi", images: [], created_at: "2026-11-30T03:00:00.000Z" };
  assert.equal(ClaimedCommand.parse(claimed).kind, "instruction", "a protocol-2 server hands out instructions only");
  assert.equal(ClaimQuery.parse({ session_id: "s", runtime_id: "r" }).lane, "instructions", "a protocol-2 claim");
  assert.equal(ClaimQuery.safeParse({ session_id: "s", runtime_id: "r", lane: "everything" }).success, false);
  assert.equal(AckBody.safeParse({ session_id: "s", runtime_id: "r", lease_token: "t" }).success, true);
  assert.equal(AckBody.safeParse({ session_id: "s", runtime_id: "r", lease_token: "t", outcome: "exploded" }).success, false);
});
