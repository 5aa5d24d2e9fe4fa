/** The server's pure decisions, table-driven: worker steps, the rate limit, the block, parsing. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { EventBody } from "../../protocol/events.ts";
import { decideStep, type WorkOutcome } from "../../server/handover/decisions.ts";
import { bodyHash, parseEvent } from "../../server/events/receipt-rules.ts";
import { DomainError } from "../../common/domain-error.ts";
import { CLOSE_MARKER, OPEN_MARKER, buildEventBlock } from "../../server/persona/block-rules.ts";
import { formatDirectMessage } from "../../server/handover/direct.ts";
import { fullBucket, takeToken } from "../../server/rate-limit-rules.ts";
import { validEvent } from "../../harness/event-client.ts";
import { sayIn, zh } from "./say.ts";

describe("decideStep", () => {
  const policy = { maxAttempts: 3, retryDelayMs: 100, say: zh };
  const rows: [string, WorkOutcome, number, ReturnType<typeof decideStep>][] = [
    ["injected", { kind: "injected" }, 1, { kind: "finish", state: "context_injected", error: null, messageId: null }],
    ["delivered", { kind: "delivered", messageId: "m1" }, 2, { kind: "finish", state: "delivered", error: null, messageId: "m1" }],
    ["busy, attempts left", { kind: "busy", reason: "turn" }, 2, { kind: "retry", error: "persona_busy: turn", delayMs: 100 }],
    [
      "busy, no attempts left",
      { kind: "busy", reason: "turn" },
      3,
      { kind: "finish", state: "failed", error: "persona_busy: turn（已尝试 3 次，放弃）", messageId: null },
    ],
    [
      "retryable error, attempts left",
      { kind: "error", retryable: true, error: "bot_offline: x" },
      1,
      { kind: "retry", error: "bot_offline: x", delayMs: 100 },
    ],
    [
      "retryable error, no attempts left",
      { kind: "error", retryable: true, error: "bot_offline: x" },
      3,
      { kind: "finish", state: "failed", error: "bot_offline: x（已尝试 3 次，放弃）", messageId: null },
    ],
    [
      "permanent error",
      { kind: "error", retryable: false, error: "no_persona: x" },
      1,
      { kind: "finish", state: "failed", error: "no_persona: x", messageId: null },
    ],
  ];
  for (const [label, outcome, attempts, expected] of rows) {
    test(label, () => assert.deepEqual(decideStep(outcome, attempts, policy), expected));
  }
});

describe("takeToken", () => {
  const limit = { perMinute: 60, burst: 2 };
  test("a full bucket allows the burst, then names the wait in whole seconds", () => {
    let bucket = fullBucket(limit, 0);
    const answers = [0, 0, 0].map(() => {
      const take = takeToken(bucket, 0, limit);
      bucket = take.bucket;
      return take.allowed ? "ok" : take.retryAfterSeconds;
    });
    assert.deepEqual(answers, ["ok", "ok", 1]);
  });
  const refills: [number, boolean][] = [
    [500, false],
    [999, false],
    [1000, true],
    [60_000, true],
  ];
  for (const [elapsedMs, allowed] of refills) {
    test(`after emptying, ${elapsedMs} ms later a token is ${allowed ? "" : "not "}there`, () => {
      const empty = { tokens: 0, updatedAtMs: 0 };
      assert.equal(takeToken(empty, elapsedMs, limit).allowed, allowed);
    });
  }
  test("the refill never exceeds the burst", () => {
    const take = takeToken({ tokens: 0, updatedAtMs: 0 }, 3_600_000, limit);
    assert.equal(take.allowed && take.bucket.tokens, 1);
  });
  test("a slow limit asks for a longer wait", () => {
    const take = takeToken({ tokens: 0, updatedAtMs: 0 }, 0, { perMinute: 2, burst: 1 });
    assert.equal(!take.allowed && take.retryAfterSeconds, 30);
  });
});

describe("the event block", () => {
  test("any text in any field round-trips, the block has exactly one closing marker, last, and no template opening", () => {
    const text = fc.oneof(
      fc.string(),
      fc.constantFrom(CLOSE_MARKER, CLOSE_MARKER.toLowerCase(), `\\${CLOSE_MARKER}`, `${OPEN_MARKER}${CLOSE_MARKER}`, "[\\/EXTERNAL_AUTOMATION_EVENT]"),
      fc.constantFrom("{{session}}", "{{{raw}}}", "\\{{", "{{#list}}x{{/list}}", "{", "{}", "{{=<% %>=}}"),
      fc.stringMatching(/^[{}\\ab]{0,8}$/),
    );
    fc.assert(
      fc.property(text, text, text, fc.dictionary(text, text, { maxKeys: 3 }), (source, task, summary, details) => {
        const event = EventBody.parse(validEvent({ source: source.slice(0, 120), task: task.slice(0, 200), summary, details }));
        const block = buildEventBlock(event, "2026-11-30T00:00:00.000Z");
        assert.ok(block.startsWith(`${OPEN_MARKER}\n`));
        assert.ok(block.endsWith(`\n${CLOSE_MARKER}`));
        assert.equal(block.toLowerCase().indexOf(CLOSE_MARKER.toLowerCase()), block.length - CLOSE_MARKER.length);
        assert.equal(block.includes("{{"), false);
        const data = JSON.parse(block.slice(OPEN_MARKER.length, -CLOSE_MARKER.length));
        assert.equal(data.source, event.source);
        assert.equal(data.task, event.task);
        assert.equal(data.summary, event.summary);
        assert.deepEqual(data.details, event.details);
      }),
    );
  });
});

describe("parseEvent", () => {
  const rows: [string, Record<string, unknown>, string][] = [
    ["context_usage alone wrong", { context_usage: { used_tokens: 1 } }, "invalid_context_usage"],
    ["context_usage and another field wrong", { context_usage: 5, status: "x" }, "invalid_context_usage"],
    ["another field wrong", { status: "x" }, "invalid_request"],
  ];
  for (const [label, patch, code] of rows) {
    test(`${label} → ${code}`, () => {
      assert.throws(
        () => parseEvent(validEvent(patch)),
        (error) => error instanceof DomainError && error.code === code,
      );
    });
  }
  test("defaults fill what an old client leaves out", () => {
    const { context_usage: _u, delivery: _d, details: _x, url: _url, ...old } = validEvent();
    const event = parseEvent(old);
    assert.equal(event.context_usage, null);
    assert.equal(event.delivery, "anon");
    assert.equal(event.details, null);
  });
});

describe("bodyHash", () => {
  test("ignores key order and defaults, not content", () => {
    const event = validEvent();
    const same = bodyHash(parseEvent(Object.fromEntries(Object.entries(event).reverse())));
    assert.equal(bodyHash(parseEvent(event)), same);
    const withoutDefaults = { ...event };
    delete withoutDefaults.delivery;
    assert.equal(bodyHash(parseEvent(withoutDefaults)), same);
    assert.notEqual(bodyHash(parseEvent({ ...event, summary: "x" })), same);
    assert.notEqual(bodyHash(parseEvent({ ...event, details: { stop_reason: "length" } })), same);
  });
});

describe("formatDirectMessage", () => {
  const rows: [string, Record<string, unknown>, string[]][] = [
    ["known usage", {}, ["【Pi Agent 通知 · 完成】", "上下文：48000 / 200000 tokens（24%）"]],
    ["unknown usage", { context_usage: null }, ["上下文：未知"]],
    ["window only", { context_usage: { used_tokens: null, context_window: 1000, percent: null } }, ["上下文：未知 / 1000 tokens"]],
    ["empty task", { task: "", status: "failed" }, ["【Pi Agent 通知 · 失败】", "任务：（无）"]],
    ["with url", { url: "https://x.test/a" }, ["链接：https://x.test/a"]],
  ];
  for (const [label, patch, lines] of rows) {
    test(label, () => {
      const text = formatDirectMessage(EventBody.parse(validEvent(patch)), zh);
      for (const line of lines) assert.ok(text.split("\n").includes(line), `${line} in ${text}`);
    });
  }
  test("in English, every label and the header", () => {
    const event = EventBody.parse(validEvent({ status: "tool_error", task: "", url: "https://x.test/a" }));
    const lines = formatDirectMessage(event, sayIn("en-US")).split("\n");
    assert.deepEqual(
      lines.map((line) => line.replace(/: .*/, ":")),
      ["[Pi Agent notice · tool error]", "Source:", "Task:", "Summary:", "Context:", "Link:", "Event:"],
    );
    assert.equal(lines[2], "Task: (none)");
    assert.equal(lines[4], "Context: 48000 / 200000 tokens (24%)");
  });
  test("no url, no link line; the event id is last", () => {
    const event = EventBody.parse(validEvent());
    const lines = formatDirectMessage(event, zh).split("\n");
    assert.ok(!lines.some((line) => line.startsWith("链接：")));
    assert.equal(lines.at(-1), `事件：${event.event_id}`);
  });
});
