/**
 * The acceptances of one tick are looked up and stored together (server/events/receipt-batch.ts):
 * one query and one transaction for all of them, on each driver the plugin is tested on. The transaction
 * shares SQLite's one connection with every other caller, so a row that fails must fail alone and
 * never roll back what another caller wrote meanwhile.
 */
import { describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { Context } from "koishi";
import { validEvent } from "../../harness/event-client.ts";
import { DATABASE_DRIVERS, startWithDatabase, type DatabaseDriver } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { AUDIT_TABLE, AuditLog } from "../../server/audit/store.ts";
import { EventIntake } from "../../server/events/intake.ts";
import type { EventRow } from "../../server/events/receipt-rules.ts";
import { EVENT_TABLE, EventStore } from "../../server/events/store.ts";

interface Parts {
  ctx: Context;
  events: EventStore;
  audit: AuditLog;
}

/**
 * A store that counts its transactions, and whose `create` of one event first lets another caller
 * write (as if its statement landed inside the transaction), then fails.
 */
class FailingStore extends EventStore {
  failing = "";
  transactions = 0;
  queries = 0;
  #ctx: Context;

  constructor(ctx: Context) {
    super(ctx);
    this.#ctx = ctx;
  }

  override async many(eventIds: string[]): Promise<EventRow[]> {
    this.queries++;
    return super.many(eventIds);
  }

  override async get(eventId: string): Promise<EventRow | undefined> {
    this.queries++;
    return super.get(eventId);
  }

  override async transaction(fn: (database: Context["database"]) => Promise<void>): Promise<void> {
    this.transactions++;
    await super.transaction(fn);
  }

  override async create(row: EventRow, database?: Pick<Context["database"], "create">): Promise<void> {
    if (row.event_id !== this.failing) return super.create(row, database);
    await this.#ctx.database.create(AUDIT_TABLE, { at: new Date(), actor: "server", action: "other.caller", session_id: null, subject: null, data: {} });
    throw new Error("disk says no");
  }
}

function start(t: TestContext, driver: Exclude<DatabaseDriver, "none">): Promise<Parts & { events: FailingStore }> {
  return startWithDatabase(t, driver, (ctx) => ({ ctx, events: new FailingStore(ctx), audit: new AuditLog(ctx) }));
}

/** An intake over `events` whose queue and syncs are recorded. */
async function recordingIntake(events: FailingStore, audit: AuditLog) {
  const queued: string[] = [];
  const syncs = { count: 0 };
  const intake = new EventIntake({
    store: events,
    worker: { enqueue: (row) => void queued.push(row.event_id), overlay: (row) => row },
    limit: { perMinute: 600, burst: 100 },
    totalLimit: { perMinute: 600, burst: 100 },
    audit,
    sync: async () => void syncs.count++,
  });
  await intake.load();
  return { intake, queued, syncs };
}

for (const driver of DATABASE_DRIVERS) {
  describe(`receipts of one tick on the ${driver} driver`, () => {
    test("concurrent acceptances are looked up in one query, stored with their audit rows in one transaction, in acceptance order, queued, and synced", async (t) => {
      const { ctx, events, audit } = await start(t, driver);
      const { intake, queued, syncs } = await recordingIntake(events, audit);
      const bodies = Array.from({ length: 5 }, () => validEvent());
      const answers = await Promise.all(bodies.map((body) => intake.submit(body, { actor: "agent" })));
      const ids = bodies.map((body) => String(body.event_id));
      assert.deepEqual(
        answers.map((answer) => [answer.event_id, answer.state, answer.duplicate]),
        ids.map((id) => [id, "queued", false]),
      );
      await waitUntil(() => queued.length === ids.length, "all handed to the worker");
      assert.deepEqual(queued, ids);
      assert.equal(events.queries, 1, "one lookup for the tick's acceptances");
      assert.equal(events.transactions, 1, "one transaction for the tick's acceptances");
      assert.equal(syncs.count, bodies.length, "each answer waited for a sync (DiskSync makes them one)");
      const rows = await ctx.database.get(EVENT_TABLE, {}, { sort: { seq: "asc" } });
      assert.deepEqual(
        rows.map((row) => row.event_id),
        ids,
      );
      const audited = await ctx.database.get(AUDIT_TABLE, { action: "event.accepted" }, { sort: { id: "asc" } });
      assert.deepEqual(
        audited.map((row) => [row.subject, row.actor]),
        ids.map((id) => [id, "agent"]),
      );
    });

    test("a row that cannot be written fails alone: the others and another caller's write meanwhile stay", async (t) => {
      const { ctx, events, audit } = await start(t, driver);
      const { intake, queued } = await recordingIntake(events, audit);
      const bodies = Array.from({ length: 3 }, () => validEvent());
      const ids = bodies.map((body) => String(body.event_id));
      events.failing = ids[1]!;
      const outcomes = await Promise.allSettled(bodies.map((body) => intake.submit(body, { actor: "agent" })));
      assert.deepEqual(
        outcomes.map((outcome) => outcome.status),
        ["fulfilled", "rejected", "fulfilled"],
      );
      await waitUntil(() => queued.length === 2, "the two stored handed to the worker");
      assert.deepEqual(queued, [ids[0], ids[2]]);
      const stored = await ctx.database.get(EVENT_TABLE, {}, { sort: { seq: "asc" } });
      assert.deepEqual(
        stored.map((row) => row.event_id),
        [ids[0], ids[2]],
      );
      const actions = await ctx.database.get(AUDIT_TABLE, {}, { sort: { id: "asc" } });
      assert.deepEqual(
        actions.map((row) => [row.action, row.subject]),
        [
          ["event.accepted", ids[0]],
          ["other.caller", null],
          ["event.accepted", ids[2]],
        ],
      );
    });

    test("the worker is handed a receipt only once it is on disk, in acceptance order, and still after a failed sync (it is stored)", async (t) => {
      const { ctx, events, audit } = await start(t, driver);
      const queued: string[] = [];
      // Every sync asked for waits here until the test settles them all.
      const pending: { resolve: () => void; reject: (error: Error) => void }[] = [];
      const intake = new EventIntake({
        store: events,
        worker: { enqueue: (row) => void queued.push(row.event_id), overlay: (row) => row },
        limit: { perMinute: 600, burst: 100 },
        totalLimit: { perMinute: 600, burst: 100 },
        audit,
        sync: () => new Promise<void>((resolve, reject) => void pending.push({ resolve, reject })),
      });
      await intake.load();
      for (const outcome of ["ok", "fail"] as const) {
        const bodies = Array.from({ length: 3 }, () => validEvent());
        const ids = bodies.map((body) => String(body.event_id));
        const before = queued.length;
        const answers = Promise.allSettled([
          ...bodies.map((body) => intake.submit(body, { actor: "agent" })),
          intake.submitBatch([validEvent()], { actor: "agent" }),
        ]);
        const rows = await waitUntil(async () => {
          const stored = await ctx.database.get(EVENT_TABLE, { event_id: ids });
          return stored.length === ids.length && stored;
        }, "the receipts stored");
        assert.equal(rows.length, ids.length);
        await waitUntil(() => pending.length === 4, "each answer waiting for its sync");
        assert.deepEqual(queued.slice(before), [], "nothing handed over while the sync runs");
        for (const sync of pending.splice(0)) {
          if (outcome === "ok") sync.resolve();
          else sync.reject(new Error("sync failed"));
        }
        const settled = await answers;
        assert.deepEqual(
          settled.map((answer) => answer.status),
          Array(4).fill(outcome === "ok" ? "fulfilled" : "rejected"),
        );
        await waitUntil(() => queued.length === before + 4, "all four handed over");
        // Acceptance order is the order of `seq`; which of the four got in first is the driver's timing.
        const accepted = await ctx.database.get(EVENT_TABLE, { event_id: queued.slice(before) }, { sort: { seq: "asc" } });
        assert.deepEqual(
          queued.slice(before),
          accepted.map((row) => row.event_id),
          "in acceptance order",
        );
        assert.deepEqual(
          [...ids].sort(),
          queued
            .slice(before)
            .filter((id) => ids.includes(id))
            .sort(),
          "the three submissions among them",
        );
      }
    });

    test("a batch is decided event by event in array order but stored in one transaction and answered after one sync", async (t) => {
      const { ctx, events, audit } = await start(t, driver);
      const { intake, queued, syncs } = await recordingIntake(events, audit);
      const replayed = validEvent();
      await intake.submit(replayed, { actor: "agent" });
      const before = { transactions: events.transactions, syncs: syncs.count };
      const bodies = [...Array.from({ length: 4 }, () => validEvent()), replayed, { ...replayed, summary: "changed" }, validEvent()];
      const ids = bodies.slice(0, 4).map((body) => String(body.event_id));
      const { accepted, refused } = await intake.submitBatch(bodies, { actor: "agent" });
      assert.deepEqual(
        accepted.map((answer) => [answer.event_id, answer.duplicate]),
        [...ids.map((id) => [id, false]), [replayed.event_id, true]],
      );
      assert.deepEqual([refused?.index, refused?.error.code], [5, "idempotency_key_reused"]);
      assert.equal(events.transactions - before.transactions, 1, "one transaction for the four new rows");
      assert.equal(syncs.count - before.syncs, 1, "one sync for the whole batch");
      await waitUntil(() => queued.length === 1 + ids.length, "the batch handed to the worker");
      assert.deepEqual(queued.slice(1), ids, "queued in array order");
      const rows = await ctx.database.get(EVENT_TABLE, {}, { sort: { seq: "asc" } });
      assert.deepEqual(
        rows.map((row) => row.event_id),
        [replayed.event_id, ...ids],
        "nothing after the refusal was stored",
      );

      events.failing = String((bodies[6] as { event_id: string }).event_id);
      const storedFirst = validEvent();
      await assert.rejects(
        intake.submitBatch([storedFirst, bodies[6]], { actor: "agent" }),
        /disk says no/,
        "a row that cannot be stored fails the whole answer",
      );
      await waitUntil(() => queued.includes(String(storedFirst.event_id)), "the row that was stored handed to the worker all the same");
    });
  });
}
