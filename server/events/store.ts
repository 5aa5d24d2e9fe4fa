/** Durable event receipts in Koishi's database. */
import type { Context, Query } from "koishi";
import { koishi, untracedDatabase } from "../koishi.ts";
import type { DeliveryRoute, ReceiptState } from "../../protocol/events.ts";
import type { EventRow } from "./receipt-rules.ts";

export const EVENT_TABLE = "anon_notify_event";

declare module "koishi" {
  interface Tables {
    [EVENT_TABLE]: EventRow;
  }
}

export const PENDING_STATES: readonly ReceiptState[] = ["queued", "processing"];

export function declareEventTable(ctx: Context): void {
  ctx.model.extend(
    EVENT_TABLE,
    {
      event_id: "string(128)",
      session_id: "string(128)",
      status: "string(16)",
      delivery: "string(8)",
      body: "text",
      body_hash: "string(64)",
      seq: "unsigned(8)",
      state: "string(24)",
      attempts: "unsigned",
      error: { type: "text", nullable: true },
      message_id: { type: "string", length: 255, nullable: true },
      created_at: "string(32)",
      received_at: "string(32)",
      updated_at: "string(32)",
    },
    { primary: "event_id" },
  );
}

export type EventPatch = Partial<Pick<EventRow, "state" | "attempts" | "error" | "message_id">>;

export class EventStore {
  /** Taken once and untraced: ingest calls it several times per event, and the store is rebuilt when the database changes. */
  readonly #database: Context["database"];

  constructor(ctx: Context) {
    this.#database = untracedDatabase(ctx);
    declareEventTable(ctx);
  }

  async get(eventId: string): Promise<EventRow | undefined> {
    const [row] = await this.#database.get(EVENT_TABLE, { event_id: eventId });
    return row;
  }

  /** The receipts of these events (those that exist), in no particular order. */
  async many(eventIds: string[]): Promise<EventRow[]> {
    return eventIds.length === 0 ? [] : this.#database.get(EVENT_TABLE, { event_id: { $in: eventIds } });
  }

  /** Stores a new receipt through `database` (default: the plugin's; else a transaction's from `transaction`). */
  async create(row: EventRow, database: Pick<Context["database"], "create"> = this.#database): Promise<void> {
    await database.create(EVENT_TABLE, row);
  }

  /** Runs `fn` in one database transaction; it commits when `fn` resolves and rolls back if `fn` rejects. */
  async transaction(fn: (database: Context["database"]) => Promise<void>): Promise<void> {
    await this.#database.transact(fn);
  }

  async update(eventId: string, patch: EventPatch): Promise<void> {
    await this.#database.set(EVENT_TABLE, { event_id: eventId }, { ...patch, updated_at: new Date().toISOString() });
  }

  /** Queued and processing events, oldest first: what a restart must resume. */
  async pending(): Promise<EventRow[]> {
    return this.#database.get(EVENT_TABLE, { $or: PENDING_STATES.map((state) => ({ state })) }, { sort: { seq: "asc" } });
  }

  async countPending(delivery: DeliveryRoute): Promise<number> {
    const count = await this.#database.eval(EVENT_TABLE, (row) => koishi.$.count(row.event_id), { delivery, $or: PENDING_STATES.map((state) => ({ state })) });
    return Number(count ?? 0);
  }

  /** The notices a direct message (or a digest of several) was delivered as, by the platform's message id. */
  async byMessageId(messageId: string): Promise<Pick<EventRow, "event_id" | "session_id" | "seq">[]> {
    return this.#database.get(EVENT_TABLE, { message_id: messageId }, { fields: ["event_id", "session_id", "seq"], sort: { seq: "desc" } });
  }

  /** Removes final receipts last changed before `cutoff`; a pruned event id is new again, so retention must exceed how long a client resends. */
  async prune(cutoff: Date): Promise<number> {
    const query = { state: { $nin: [...PENDING_STATES] }, updated_at: { $lt: cutoff.toISOString() } };
    const result = await this.#database.remove(EVENT_TABLE, query as Query<EventRow>);
    return result.removed ?? 0;
  }

  async lastSeq(): Promise<number> {
    const [row] = await this.#database.get(EVENT_TABLE, {}, { sort: { seq: "desc" }, limit: 1, fields: ["seq"] });
    return row?.seq ?? 0;
  }
}
