/** The triggers' tables: one row per delivery id and trigger (the key that makes a redelivery a duplicate, and
 * what the limits count), and the session each key's deliveries go to. */
import type { Context, Query } from "koishi";
import type { TriggerGuard } from "../../protocol/triggers.ts";

export type DeliveryOutcome = "started" | "resumed" | "continued" | "joined" | "failed";

export interface DeliveryRow {
  /** `<trigger>:<delivery id>`. */
  id: string;
  trigger_name: string;
  delivery_id: string;
  item_key: string;
  event: string;
  actor: string;
  state: "accepted" | "refused";
  guard: TriggerGuard | null;
  outcome: DeliveryOutcome | null;
  session_id: string | null;
  received_at: Date;
}

export interface KeyRow {
  /** `<trigger>:<repository>#<number>`. */
  item_key: string;
  session_id: string;
  /** Empty when no host ran it (a terminal session mapped by hand): a resume then picks the host. */
  host: string;
  project: string;
  /** The start job that began (or resumed) the session; empty for one the owner mapped by hand. */
  start_command_id: string;
  updated_at: Date;
}

declare module "koishi" {
  interface Tables {
    anon_notify_trigger_delivery: DeliveryRow;
    anon_notify_trigger_key: KeyRow;
  }
}

const DELIVERY_TABLE = "anon_notify_trigger_delivery";
const KEY_TABLE = "anon_notify_trigger_key";

export class TriggerStore {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    ctx.model.extend(
      DELIVERY_TABLE,
      {
        id: { type: "string", length: 200 },
        trigger_name: { type: "string", length: 64 },
        delivery_id: { type: "string", length: 128 },
        item_key: { type: "string", length: 320 },
        event: { type: "string", length: 130 },
        actor: { type: "string", length: 100 },
        state: { type: "string", length: 16 },
        guard: { type: "string", length: 16, nullable: true },
        outcome: { type: "string", length: 16, nullable: true },
        session_id: { type: "string", length: 128, nullable: true },
        received_at: "timestamp",
      },
      { primary: "id" },
    );
    ctx.model.extend(
      KEY_TABLE,
      {
        item_key: { type: "string", length: 400 },
        session_id: { type: "string", length: 128 },
        host: { type: "string", length: 64 },
        project: { type: "string", length: 200 },
        start_command_id: { type: "string", length: 128 },
        updated_at: "timestamp",
      },
      { primary: "item_key" },
    );
  }

  async has(id: string): Promise<boolean> {
    return (await this.#ctx.database.get(DELIVERY_TABLE, { id }, ["id"])).length > 0;
  }

  /** Stores the delivery unless its id is there; false for a duplicate (the primary key decides, also across processes). */
  async insert(row: DeliveryRow): Promise<boolean> {
    try {
      await this.#ctx.database.create(DELIVERY_TABLE, row);
      return true;
    } catch (error) {
      if (await this.has(row.id)) return false;
      throw error;
    }
  }

  async settle(id: string, outcome: DeliveryOutcome, sessionId: string | null): Promise<void> {
    await this.#ctx.database.set(DELIVERY_TABLE, { id }, { outcome, session_id: sessionId });
  }

  async countRuns(trigger: string, since: Date, itemKey?: string): Promise<number> {
    const query = { trigger_name: trigger, state: "accepted", received_at: { $gte: since }, ...(itemKey ? { item_key: itemKey } : {}) };
    return (await this.#ctx.database.get(DELIVERY_TABLE, query as Query<DeliveryRow>, ["id"])).length;
  }

  async trippedSince(trigger: string, since: Date): Promise<Date | null> {
    const query = { trigger_name: trigger, guard: "breaker", received_at: { $gte: since } } as Query<DeliveryRow>;
    const [row] = await this.#ctx.database.get(DELIVERY_TABLE, query, { fields: ["received_at"], sort: { received_at: "desc" }, limit: 1 });
    return row ? new Date(row.received_at) : null;
  }

  async key(itemKey: string) {
    return (await this.#ctx.database.get(KEY_TABLE, { item_key: itemKey }))[0];
  }

  async setKey(row: KeyRow): Promise<void> {
    await this.#ctx.database.upsert(KEY_TABLE, [row]);
  }
}
