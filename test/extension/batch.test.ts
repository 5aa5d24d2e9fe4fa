/**
 * The batch decisions (extension/notices/batch.ts), table-driven: how much the next request
 * carries, and what a batch answer means for each event sent.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { batchOutcomes, batchSize, takeChunk } from "../../extension/notices/batch.ts";
import { type BatchAccepted, EventBody } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";

const sized = (...bytes: number[]) => bytes.map((b) => ({ bytes: b }));

test("takeChunk: at least the first, then up to the count, the body limit or a barrier", () => {
  const cases: [string, { bytes: number; barrier?: boolean }[], number, number][] = [
    ["one waiting", sized(100), 32, 1],
    ["all fit", sized(100, 100, 100), 32, 3],
    ["count cap", sized(100, 100, 100), 2, 2],
    ["a server without batches", sized(100, 100), 1, 1],
    ["a barrier stops it", [{ bytes: 100 }, { bytes: 100, barrier: true }, { bytes: 100 }], 32, 1],
    ["the body limit", sized(LIMITS.eventBatchBytes / 2, LIMITS.eventBatchBytes / 2), 32, 1],
    ["a single event over the limit still goes alone", sized(LIMITS.eventBatchBytes * 2, 10), 32, 1],
  ];
  for (const [name, waiting, max, expected] of cases) assert.equal(takeChunk(waiting, max), expected, name);
});

test("batchSize: what the server said, within the protocol's cap; one when it said nothing", () => {
  const cases: [number | undefined, number][] = [
    [undefined, 1],
    [1, 1],
    [10, 10],
    [LIMITS.eventBatchMax, LIMITS.eventBatchMax],
    [10_000, LIMITS.eventBatchMax],
  ];
  for (const [said, expected] of cases) assert.equal(batchSize(said), expected, String(said));
});

const event = (n: number) =>
  EventBody.parse({
    event_id: `pi:s:run:${n}`,
    session_id: "s",
    source: "Pi",
    task: "t",
    status: "completed",
    summary: "",
    created_at: "2026-12-01T00:00:00.000Z",
  });
const sent = [event(1), event(2), event(3)];
const receipt = (n: number, state: "queued" | "failed" = "queued", duplicate = false) => ({ event_id: `pi:s:run:${n}`, state, duplicate });
const refusal = (index: number, status: number, error: string, extra: object = {}) => ({ index, event_id: `pi:s:run:${index + 1}`, status, error, ...extra });

test("batchOutcomes: one outcome per event looked at, in order; a refusal is classified as the single route's answer", () => {
  const now = Date.UTC(2026, 11, 1);
  const cases: [string, BatchAccepted, string[]][] = [
    ["all accepted", { accepted: [receipt(1), receipt(2), receipt(3)], refused: null }, ["ok queued", "ok queued", "ok queued"]],
    ["a replay is accepted", { accepted: [receipt(1, "queued", true), receipt(2), receipt(3)], refused: null }, ["ok queued", "ok queued", "ok queued"]],
    [
      "a failed receipt is not a success",
      { accepted: [receipt(1, "failed"), receipt(2), receipt(3)], refused: null },
      ["receipt_failed no-retry", "ok queued", "ok queued"],
    ],
    [
      "rate limited after one",
      { accepted: [receipt(1)], refused: refusal(1, 429, "rate_limited", { retry_after_seconds: 3 }) },
      ["ok queued", "rate_limited retry after 3000"],
    ],
    ["invalid first", { accepted: [], refused: refusal(0, 400, "invalid_request") }, ["invalid_request no-retry"]],
    [
      "body reused",
      { accepted: [receipt(1), receipt(2)], refused: refusal(2, 422, "idempotency_key_reused") },
      ["ok queued", "ok queued", "idempotency_key_reused no-retry"],
    ],
  ];
  for (const [name, answer, expected] of cases) {
    const described = batchOutcomes(sent, answer, now).map((o) =>
      o.ok ? `ok ${o.value.state}` : `${o.error.code} ${o.error.retryable ? `retry after ${o.error.retryAfterMs}` : "no-retry"}`,
    );
    assert.deepEqual(described, expected, name);
  }
});

test("batchOutcomes: an answer that does not fit what was sent is not trusted", () => {
  const cases: [string, BatchAccepted][] = [
    ["nothing looked at", { accepted: [], refused: null }],
    ["a prefix without a refusal", { accepted: [receipt(1)], refused: null }],
    ["another event", { accepted: [receipt(1), receipt(5), receipt(3)], refused: null }],
    ["more than sent", { accepted: [receipt(1), receipt(2), receipt(3), receipt(4)], refused: null }],
    ["a refusal out of place", { accepted: [receipt(1)], refused: refusal(2, 400, "invalid_request") }],
    ["a refusal naming another event", { accepted: [], refused: { ...refusal(0, 400, "invalid_request"), event_id: "pi:s:run:9" } }],
    ["a refusal past the end", { accepted: [receipt(1), receipt(2), receipt(3)], refused: refusal(3, 400, "invalid_request") }],
  ];
  for (const [name, answer] of cases) assert.throws(() => batchOutcomes(sent, answer, 0), { code: "invalid_answer" }, name);
});
