/**
 * What the command queue and event idempotency rely on from minato, on every driver the plugin is
 * tested on (SQLite and minato's own memory driver), through a real Koishi app:
 *
 * - `set(table, guard, patch)` answers `matched`: the rows the guard found, whether or not the
 *   patch changed them. A guard holds columns compared for equality, `null` meaning IS NULL, and a
 *   list meaning one of. Every claim, ACK, cancel, expiry and roll-back is such a write.
 * - `create` with an existing primary key rejects and leaves the row as it was.
 * - `$lte` on a timestamp column, `eval` with `$.sum`, `sort`, `limit`, `fields`, JSON columns and
 *   an auto-increment primary key read back as written.
 *
 * Nothing relies on a unique index (the memory driver keeps none): request keys and event ids are
 * checked inside one process, one creation at a time, and the indexes are a backstop where the
 * driver has them.
 */
import { describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { Context, Query } from "koishi";
import type { ClaimAnswer } from "../../protocol/queue.ts";
import type { CommandRecord } from "../../server/queue/decisions.ts";
import { validEvent } from "../../harness/event-client.ts";
import { DATABASE_DRIVERS, startWithDatabase, type DatabaseDriver } from "../../harness/koishi.ts";
import { CommandStore, type NewCommand } from "../../server/queue/store.ts";
import { COMMAND_TABLE } from "../../server/queue/table.ts";
import { guardOf } from "../../server/queue/decisions.ts";
import { DomainError } from "../../common/domain-error.ts";
import { EventIntake } from "../../server/events/intake.ts";
import { newEventRow, bodyHash, parseEvent } from "../../server/events/receipt-rules.ts";
import { EVENT_TABLE, EventStore } from "../../server/events/store.ts";
import { waitUntil } from "../../harness/wait.ts";
import { imageOf } from "./images.ts";

interface Stores {
  ctx: Context;
  commands: CommandStore;
  events: EventStore;
}

/** A Koishi app on `driver` with the command and event stores, as the plugin builds them. */
function startStores(t: TestContext, driver: Exclude<DatabaseDriver, "none">, leaseMs = 60_000): Promise<Stores> {
  return startWithDatabase(t, driver, (ctx) => ({
    ctx,
    commands: new CommandStore(ctx, { leaseMs, imageBudgetBytes: 1024 * 1024, stopTtlMs: 30_000 }),
    events: new EventStore(ctx),
  }));
}

/** As in the store: minato's query types refuse `null` and lists for these columns, which are valid at run time. */
function where(query: Partial<Record<keyof CommandRecord, unknown>>): Query<CommandRecord> {
  return query as Query<CommandRecord>;
}

function leaseToken(answer: ClaimAnswer): string {
  if (!answer.command) throw new Error("the claim leased nothing");
  return answer.lease.token;
}

function command(instruction: string, request_key: string | null = null): NewCommand {
  return { session_id: "s-1", event_id: null, origin: "operator", instruction, images: [], request_key };
}

for (const driver of DATABASE_DRIVERS) {
  describe(`minato guarantees on the ${driver} driver`, () => {
    test("a conditional set answers matched: the first write guarded by a read wins, the second finds nothing", async (t) => {
      const { ctx, commands } = await startStores(t, driver);
      const { record } = await commands.create(command("once"));
      const db = ctx.database;
      const guard = guardOf(record);
      assert.equal(guard.lease_token, null, "the guard compares a null column");
      const patch = { state: "leased" as const, lease_token: "t-1", updated_at: new Date() };
      assert.equal((await db.set(COMMAND_TABLE, where(guard), patch)).matched, 1);
      const second = await db.set(COMMAND_TABLE, where(guard), { ...patch, lease_token: "t-2" });
      assert.equal(second.matched, 0, "the same guard no longer matches");
      const [stored] = await db.get(COMMAND_TABLE, { seq: record.seq });
      assert.equal(stored!.lease_token, "t-1");
      // A patch that changes nothing still counts the row: matched, not modified.
      assert.equal((await db.set(COMMAND_TABLE, where({ seq: record.seq, state: ["pending", "leased"] }), { state: "leased" })).matched, 1);
    });

    test("create with an existing primary key rejects and leaves the stored row as it was", async (t) => {
      const { ctx, events } = await startStores(t, driver);
      const event = parseEvent(validEvent());
      const row = newEventRow(event, bodyHash(event), 1, new Date().toISOString());
      await events.create(row);
      await assert.rejects(events.create({ ...row, body: "{}", seq: 2 }));
      const stored = await ctx.database.get(EVENT_TABLE, { event_id: row.event_id });
      assert.equal(stored.length, 1);
      assert.equal(stored[0]!.body, row.body);
    });

    test("concurrent claims lease a command once, and a cancel racing a claim never both win", async (t) => {
      const { commands } = await startStores(t, driver);
      await commands.create(command("only once"));
      const claims = await Promise.all(Array.from({ length: 6 }, () => commands.claim("s-1", "r-1", false)));
      assert.equal(claims.filter((claim) => claim.command).length, 1);
      for (let round = 0; round < 10; round++) {
        const { record } = await commands.create(command(`race ${round}`));
        const [cancel, claim] = await Promise.allSettled([commands.cancel("s-1", record.command_id), commands.claim("s-1", `r-${round}`, false)]);
        const cancelled = cancel.status === "fulfilled";
        const claimed = claim.status === "fulfilled" && claim.value.command?.command_id === record.command_id;
        assert.ok(cancelled !== claimed, `round ${round}: exactly one of cancel and claim wins`);
        if (!cancelled) assert.ok(cancel.reason instanceof DomainError && cancel.reason.code === "delivery_started");
        if (claimed && claim.status === "fulfilled")
          await commands.ack(record.command_id, { session_id: "s-1", runtime_id: `r-${round}`, lease_token: leaseToken(claim.value) });
      }
    });

    test("a request key is used once however many creations race; commands without one are all kept", async (t) => {
      const { commands } = await startStores(t, driver);
      const keyed = await Promise.all(Array.from({ length: 5 }, () => commands.create(command("same", "operator:k-1"))));
      assert.equal(new Set(keyed.map((created) => created.record.command_id)).size, 1);
      assert.equal(keyed.filter((created) => !created.duplicate).length, 1);
      const plain = await Promise.all(Array.from({ length: 5 }, (_, index) => commands.create(command(`plain ${index}`))));
      assert.equal(new Set(plain.map((created) => created.record.command_id)).size, 5, "null request keys never collide");
      const listed = await commands.list("s-1", 3);
      assert.deepEqual(
        listed.map((summary) => summary.command_id),
        plain
          .slice(-3)
          .reverse()
          .map((created) => created.record.command_id),
        "newest first, limited",
      );
    });

    test("leases expire by time, and the image budget sums only active commands", async (t) => {
      const { ctx, commands } = await startStores(t, driver, 1);
      const image = imageOf("image/png", 1000);
      const { record } = await commands.create({ ...command("look"), images: [image] });
      assert.equal(await commands.activeImageBytes(), 1000);
      const claimed = await commands.claim("s-1", "r-1", true);
      assert.deepEqual(claimed.command?.images, [image], "JSON column read back as written");
      await waitUntil(async () => {
        await commands.expireLeases();
        const [row] = await ctx.database.get(COMMAND_TABLE, { seq: record.seq });
        return row!.state === "pending" ? row : undefined;
      }, "the 1 ms lease expired back to pending");
      const again = await commands.claim("s-1", "r-2", true);
      await commands.ack(record.command_id, { session_id: "s-1", runtime_id: "r-2", lease_token: leaseToken(again) });
      assert.equal(await commands.activeImageBytes(), 0, "a final command holds no budget");
      const [row] = await ctx.database.get(COMMAND_TABLE, { seq: record.seq });
      assert.ok(row!.created_at instanceof Date && row!.first_claimed_at instanceof Date, "timestamps read back as dates");
    });

    test("concurrent copies of one event are stored once; another body under its id is refused", async (t) => {
      const { ctx, events } = await startStores(t, driver);
      const queued: string[] = [];
      const intake = new EventIntake({
        store: events,
        worker: { enqueue: (row) => void queued.push(row.event_id), overlay: (row) => row },
        limit: { perMinute: 600, burst: 100 },
        totalLimit: { perMinute: 600, burst: 100 },
      });
      await intake.load();
      const event = validEvent();
      const answers = await Promise.all(Array.from({ length: 4 }, () => intake.submit(event, { actor: "agent" })));
      assert.equal(answers.filter((answer) => !answer.duplicate).length, 1);
      assert.deepEqual(queued, [event.event_id]);
      await assert.rejects(
        intake.submit({ ...event, summary: "another" }, { actor: "agent" }),
        (error) => error instanceof DomainError && error.code === "idempotency_key_reused",
      );
      assert.equal((await ctx.database.get(EVENT_TABLE, { event_id: String(event.event_id) })).length, 1);
    });
  });
}
