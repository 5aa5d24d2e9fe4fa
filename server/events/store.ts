/**
 * Durable event receipts in Koishi's database (whatever driver the user's Koishi runs).
 * The presence/command side reads `event_id` and `session_id` here to bind commands to events.
 */
import type { Context } from "koishi";
import type { DeliveryRoute, EventStatus, ReceiptState } from "../../protocol/events.ts";

export const EVENT_TABLE = "anon_notify_event";

export interface EventRow {
  event_id: string;
  session_id: string;
  status: EventStatus;
  delivery: DeliveryRoute;
  /** The validated request body as JSON: what is injected, and what a replay is compared with. */
  body: string;
  body_hash: string;
  /** Acceptance order; the worker handles each delivery route in this order. */
  seq: number;
  state: ReceiptState;
  attempts: number;
  error: string | null;
  message_id: string | null;
  created_at: string;
  received_at: string;
  updated_at: string;
}

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
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    declareEventTable(ctx);
  }

  async get(eventId: string): Promise<EventRow | undefined> {
    const [row] = await this.#ctx.database.get(EVENT_TABLE, { event_id: eventId });
    return row;
  }

  /** The receipts of these events (those that exist), in no particular order. */
  async many(eventIds: string[]): Promise<EventRow[]> {
    return eventIds.length === 0 ? [] : this.#ctx.database.get(EVENT_TABLE, { event_id: { $in: eventIds } });
  }

  async create(row: EventRow): Promise<void> {
    await this.#ctx.database.create(EVENT_TABLE, row);
  }

  async update(eventId: string, patch: EventPatch): Promise<void> {
    await this.#ctx.database.set(EVENT_TABLE, { event_id: eventId }, { ...patch, updated_at: new Date().toISOString() });
  }

  /** Queued and processing events, oldest first: what a restart must resume. */
  async pending(): Promise<EventRow[]> {
    return this.#ctx.database.get(EVENT_TABLE, { $or: PENDING_STATES.map((state) => ({ state })) }, { sort: { seq: "asc" } });
  }

  async lastSeq(): Promise<number> {
    const [row] = await this.#ctx.database.get(EVENT_TABLE, {}, { sort: { seq: "desc" }, limit: 1, fields: ["seq"] });
    return row?.seq ?? 0;
  }
}
