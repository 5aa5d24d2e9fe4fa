import { test } from "node:test";
import assert from "node:assert/strict";
import { messagesFor } from "../../extension/texts/messages.ts";
import { buildEvent, finalEventId, finalNotice, runSummary, sampleContextUsage, truncate, type PiContextUsage } from "../../extension/notices/notice-rules.ts";
import { startRun, withAssistant, withLowLevelStart } from "../../lifecycle.ts";
import { EventBody } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";

const usageCases: { name: string; read: () => PiContextUsage | undefined; expected: unknown }[] = [
  {
    name: "a known estimate is copied field by field",
    read: () => ({ tokens: 48_000, contextWindow: 200_000, percent: 24 }),
    expected: { used_tokens: 48_000, context_window: 200_000, percent: 24 },
  },
  {
    name: "the percentage is rounded to two decimals",
    read: () => ({ tokens: 2885, contextWindow: 200_000, percent: 1.4425000000000001 }),
    expected: { used_tokens: 2885, context_window: 200_000, percent: 1.44 },
  },
  {
    name: "after compaction the window is known and the usage is null",
    read: () => ({ tokens: null, contextWindow: 200_000, percent: null }),
    expected: { used_tokens: null, context_window: 200_000, percent: null },
  },
  {
    name: "a finite percent above 100 is kept",
    read: () => ({ tokens: 250_000, contextWindow: 200_000, percent: 125 }),
    expected: { used_tokens: 250_000, context_window: 200_000, percent: 125 },
  },
  { name: "no model means null", read: () => undefined, expected: null },
  {
    name: "a throwing reader means null",
    read: () => {
      throw new Error("stale ctx");
    },
    expected: null,
  },
  { name: "negative tokens mean null", read: () => ({ tokens: -1, contextWindow: 200_000, percent: 0 }), expected: null },
  { name: "a zero window means null", read: () => ({ tokens: 0, contextWindow: 0, percent: 0 }), expected: null },
  { name: "NaN percent means null", read: () => ({ tokens: 1, contextWindow: 200_000, percent: Number.NaN }), expected: null },
  { name: "tokens known without percent means null", read: () => ({ tokens: 1, contextWindow: 200_000, percent: null }), expected: null },
  { name: "fractional tokens mean null", read: () => ({ tokens: 1.5, contextWindow: 200_000, percent: 1 }), expected: null },
];
for (const c of usageCases) {
  test(`sampleContextUsage: ${c.name}`, () => {
    assert.deepEqual(sampleContextUsage(c.read), c.expected);
  });
}

test("truncate cuts by characters, marks the cut and never splits a surrogate pair", () => {
  assert.equal(truncate("abc", 3), "abc");
  assert.equal(truncate("abcd", 3), "ab…");
  assert.equal(truncate("😀😀😀😀", 3), "😀😀…");
  assert.equal(Array.from(truncate("x".repeat(5000), 1200)).length, 1200);
});

const facts = withAssistant(withLowLevelStart(startRun(0)), {
  stopReason: "stop",
  errorMessage: null,
  text: "全部测试通过。",
  entryId: "a1",
  toolCalls: 0,
});
const content = { maxTaskChars: 200, maxSummaryChars: 1200, includeProject: false, includeFinalReply: true };

const zhNotice = messagesFor("zh-CN").notice;
const enNotice = messagesFor("en-US").notice;

test("runSummary: completion carries the final reply, or a plain sentence without it, in the session's language", () => {
  const completed = { kind: "completed", stopReason: "stop" } as const;
  assert.equal(runSummary(completed, facts, content, "p", zhNotice).summary, "全部测试通过。");
  assert.equal(runSummary(completed, facts, { ...content, includeFinalReply: false }, "p", zhNotice).summary, "任务已完成。");
  assert.equal(runSummary(completed, facts, { ...content, includeFinalReply: false }, "p", enNotice).summary, "Task completed.");
  assert.equal(runSummary(completed, facts, { ...content, includeProject: true }, "demo", zhNotice).summary, "项目 demo：全部测试通过。");
  assert.equal(runSummary(completed, facts, { ...content, includeProject: true }, "demo", enNotice).summary, "Project demo: 全部测试通过。");
});

test("runSummary: failure says why, with the error message, in the session's language", () => {
  const failed = { kind: "failed", stopReason: "error", reason: "error", errorMessage: "401 unauthorized" } as const;
  const noReply = { ...content, includeFinalReply: false };
  assert.equal(runSummary(failed, facts, noReply, "p", zhNotice).summary, "模型请求出错：401 unauthorized");
  assert.equal(runSummary(failed, facts, noReply, "p", enNotice).summary, "Failed: the model request failed: 401 unauthorized");
  assert.equal(
    runSummary({ ...failed, reason: "length", errorMessage: null }, facts, noReply, "p", enNotice).summary,
    "Failed: the reply was cut off at the length limit.",
  );
});

test("buildEvent applies the configured and wire limits and yields a valid wire body", () => {
  const body = buildEvent(
    {
      eventId: finalEventId("019a-session", "a1", "completed"),
      sessionId: "019a-session",
      runtimeId: "r-1",
      source: "s".repeat(500),
      task: "t".repeat(500),
      status: "completed",
      summary: "m".repeat(5000),
      details: { stop_reason: "stop" },
      contextUsage: null,
      createdAt: new Date("2026-11-30T03:00:00.000Z"),
    },
    { maxTaskChars: 50, maxSummaryChars: 5000 },
  );
  assert.equal(body.event_id, "pi:019a-session:a1:completed");
  assert.equal(body.source.length, LIMITS.sourceChars);
  assert.equal(body.task.length, 50);
  assert.equal(body.summary.length, LIMITS.summaryChars);
  assert.equal(body.context_usage, null);
  assert.equal(body.delivery, "anon");
  assert.deepEqual(EventBody.parse(body), body);
});

const noticeContext = {
  sessionId: "s-1",
  runtimeId: "r-1",
  source: "Pi Agent · p",
  project: "p",
  content,
  contextUsage: null,
  now: new Date(0),
  text: enNotice,
};
const unpersisted = withAssistant(withLowLevelStart(startRun(0)), { stopReason: "stop", errorMessage: null, text: "done", entryId: null, toolCalls: 0 });
const finalCases: { name: string; outcome: Parameters<typeof finalNotice>[0]; facts: typeof facts; expected: string | undefined }[] = [
  { name: "a completed run is named by its persisted reply", outcome: { kind: "completed", stopReason: "stop" }, facts, expected: "pi:s-1:a1:completed" },
  {
    name: "a failed run is named by its persisted reply",
    outcome: { kind: "failed", stopReason: "error", reason: "error", errorMessage: "x" },
    facts,
    expected: "pi:s-1:a1:failed",
  },
  {
    name: "a reply not found in the session still reports the run, unique in this runtime",
    outcome: { kind: "completed", stopReason: "stop" },
    facts: unpersisted,
    expected: "pi:s-1:r-1:7:completed",
  },
  { name: "an interrupted run is not reported", outcome: { kind: "interrupted" }, facts, expected: undefined },
  { name: "a silent run is not reported", outcome: { kind: "silent" }, facts, expected: undefined },
];
for (const c of finalCases) {
  test(`finalNotice: ${c.name}`, () => {
    const notice = finalNotice(c.outcome, c.facts, noticeContext, 7);
    assert.equal(notice?.event_id, c.expected);
    if (notice) assert.ok(EventBody.safeParse(notice).success, "a valid event");
  });
}
