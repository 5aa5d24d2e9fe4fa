/**
 * POST /events/batch on a real Koishi app: the accepted prefix in array order, the refusal that
 * ends it worded as the single route would, idempotency per event, one token per event, the
 * request-level errors, and the capability a client learns it from.
 */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { BatchAccepted, EventAccepted } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { getReceipt, postEvent, validEvent } from "../../harness/event-client.ts";

async function postBatch(koishi: KoishiHarness, body: unknown) {
  const response = await fetch(`${koishi.baseUrl}/events/batch`, {
    method: "POST",
    headers: { authorization: `Bearer ${koishi.token}`, "content-type": "application/json" },
    body: typeof body === "string" ? body : JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, body: (await response.json()) as Record<string, unknown> };
}

const ids = (events: Record<string, unknown>[]) => events.map((e) => String(e.event_id));

describe("POST /events/batch", () => {
  let koishi: KoishiHarness;
  before(async () => {
    koishi = await startKoishi({ config: { eventsPerMinute: 6000, eventBurst: 1000, personaWaitMs: 0 } });
  });
  after(() => koishi.stop());

  test("every event is accepted and stored in array order, one receipt each", async () => {
    const events = [validEvent(), validEvent({ status: "failed" }), validEvent()];
    const answer = await postBatch(koishi, { events });
    assert.equal(answer.status, 200);
    const parsed = BatchAccepted.parse(answer.body);
    assert.deepEqual(
      parsed.accepted.map((a) => [a.event_id, a.duplicate]),
      ids(events).map((id) => [id, false]),
    );
    assert.equal(parsed.refused, null);
    const rows = await koishi.app.database.get(EVENT_TABLE, { event_id: { $in: ids(events) } });
    const bySeq = [...rows].sort((a, b) => a.seq - b.seq).map((row) => row.event_id);
    assert.deepEqual(bySeq, ids(events), "handed to delivery in the order sent");
  });

  test("the first refused event ends the batch: the prefix is stored, the rest is not looked at", async () => {
    const first = validEvent();
    const bad = validEvent({ summary: "x".repeat(LIMITS.summaryChars + 1) });
    const after = validEvent();
    const answer = await postBatch(koishi, { events: [first, bad, after] });
    assert.equal(answer.status, 200);
    const parsed = BatchAccepted.parse(answer.body);
    assert.deepEqual(
      parsed.accepted.map((a) => a.event_id),
      [first.event_id],
    );
    assert.equal(parsed.refused?.index, 1);
    assert.equal(parsed.refused?.event_id, bad.event_id);
    assert.equal(parsed.refused?.status, 400);
    assert.equal(parsed.refused?.error, "invalid_request");
    assert.deepEqual(
      parsed.refused?.issues?.map((i) => i.path),
      ["summary"],
    );
    assert.equal((await getReceipt(koishi, String(first.event_id)))?.state !== undefined, true);
    assert.equal(await getReceipt(koishi, String(after.event_id)), undefined, "after the refusal nothing was stored");
  });

  test("idempotency per event: a replay answers duplicate, a changed body is refused 422, an element without an id is named null", async () => {
    const sent = validEvent();
    assert.equal((await postEvent(koishi, sent)).status, 202);
    const replay = await postBatch(koishi, { events: [sent, { ...sent, summary: "another body" }] });
    const parsed = BatchAccepted.parse(replay.body);
    assert.deepEqual(
      parsed.accepted.map((a) => [a.event_id, a.duplicate]),
      [[sent.event_id, true]],
    );
    assert.deepEqual(parsed.refused && [parsed.refused.index, parsed.refused.status, parsed.refused.error], [1, 422, "idempotency_key_reused"]);

    const nameless = BatchAccepted.parse((await postBatch(koishi, { events: [42] })).body);
    assert.deepEqual(nameless.accepted, []);
    assert.equal(nameless.refused?.event_id, null);
    const server = BatchAccepted.parse((await postBatch(koishi, { events: [validEvent({ event_id: "watchdog:forged" })] })).body);
    assert.equal(server.refused?.error, "invalid_request", "the server's own event ids are refused here too");
  });

  test("a request that is not a batch is refused as a whole, before any event is read", async () => {
    const cases: [string, unknown, number, string][] = [
      ["no events key", { event: validEvent() }, 400, "invalid_request"],
      ["empty", { events: [] }, 400, "invalid_request"],
      ["too many", { events: Array.from({ length: LIMITS.eventBatchMax + 1 }, () => validEvent()) }, 400, "invalid_request"],
      ["a bare array", [validEvent()], 400, "invalid_request"],
      ["malformed JSON", "{", 400, "invalid_json"],
      ["too large", { events: [validEvent({ details: { pad: "x".repeat(LIMITS.eventBatchBytes) } })] }, 413, "payload_too_large"],
    ];
    for (const [name, body, status, error] of cases) {
      const answer = await postBatch(koishi, body);
      assert.equal(answer.status, status, name);
      assert.equal(answer.body.error, error, name);
    }
    const tooMany = (cases[2]![1] as { events: Record<string, unknown>[] }).events;
    assert.equal(await getReceipt(koishi, String(tooMany[0]!.event_id)), undefined, "nothing of a refused request is stored");
  });

  test("the single route tells batch_max and /health lists events_batch", async () => {
    const answer = await postEvent(koishi, validEvent());
    assert.equal(EventAccepted.parse(answer.body).batch_max, LIMITS.eventBatchMax);
    const health = await fetch(`${koishi.baseUrl}/health`, { headers: { authorization: `Bearer ${koishi.token}` } });
    assert.ok(((await health.json()) as { capabilities: string[] }).capabilities.includes("events_batch"));
  });
});

describe("POST /events/batch under the event rate limit", () => {
  let koishi: KoishiHarness;
  before(async () => {
    koishi = await startKoishi({ config: { eventsPerMinute: 1, eventBurst: 2, personaWaitMs: 0 } });
  });
  after(() => koishi.stop());

  test("each event takes one token; the first without one is refused 429 with its wait", async () => {
    const events = [validEvent(), validEvent(), validEvent(), validEvent()];
    const parsed = BatchAccepted.parse((await postBatch(koishi, { events })).body);
    assert.deepEqual(
      parsed.accepted.map((a) => a.event_id),
      ids(events).slice(0, 2),
    );
    assert.equal(parsed.refused?.index, 2);
    assert.equal(parsed.refused?.status, 429);
    assert.equal(parsed.refused?.error, "rate_limited");
    assert.ok((parsed.refused?.retry_after_seconds ?? 0) >= 1, "the wait is told");
  });
});
