/** The `anon_notify_command` table: columns, reads that change nothing, and retention's removal. */
import { randomUUID } from "node:crypto";
import type { Context, Query } from "koishi";
import type { CommandSummary } from "../../protocol/queue.ts";
import { koishi } from "../koishi.ts";
import { ACTIVE_STATES, summarize, type CommandRecord } from "./decisions.ts";

declare module "koishi" {
  interface Tables {
    anon_notify_command: CommandRecord;
  }
}

export const COMMAND_TABLE = "anon_notify_command";
const ID_LENGTH = 128;
const FINAL_STATE_LIST: CommandRecord["state"][] = ["accepted", "cancelled"];
export const FINAL_STATES: ReadonlySet<string> = new Set(FINAL_STATE_LIST);
/** minato's query types reject `state: [...]` on union columns and `null` on required ones, both valid at run time. */
export function where(query: Partial<Record<keyof CommandRecord, unknown>>): Query<CommandRecord> {
  return query as Query<CommandRecord>;
}

/** What a new command starts as: pending, never claimed, no outcome. */
const FRESH = {
  state: "pending",
  lease_token: null,
  lease_runtime_id: null,
  lease_expires_at: null,
  first_claimed_at: null,
  deliveries: 0,
  outcome: null,
  cancel_reason: null,
} as const;

/** What a caller decides about a new command; the rest of its row is the table's (`CommandTable.insert`). */
export type NewRow = Omit<CommandRecord, keyof typeof FRESH | "seq" | "command_id" | "event_id" | "created_at" | "updated_at"> & { event_id: string | null };

export function pendingRow(fields: NewRow & { command_id: string; event_id: string }, now: Date): Omit<CommandRecord, "seq"> {
  return { ...fields, ...FRESH, created_at: now, updated_at: now };
}

const COLUMNS = {
  seq: "unsigned",
  command_id: { type: "string", length: ID_LENGTH },
  session_id: { type: "string", length: ID_LENGTH },
  event_id: { type: "string", length: ID_LENGTH },
  origin: { type: "string", length: 16 },
  // Rows from before protocol 3 are instructions.
  kind: { type: "string", length: 24, initial: "instruction" },
  payload: { type: "json", nullable: true },
  instruction: "text",
  images: "json",
  image_count: "unsigned",
  image_bytes: "unsigned",
  image_digest: { type: "string", length: 64, nullable: true },
  request_key: { type: "string", length: 640, nullable: true },
  request_digest: { type: "string", length: 64 },
  state: { type: "string", length: 16 },
  lease_token: { type: "string", length: 64, nullable: true },
  lease_runtime_id: { type: "string", length: ID_LENGTH, nullable: true },
  lease_expires_at: { type: "timestamp", nullable: true },
  first_claimed_at: { type: "timestamp", nullable: true },
  deliveries: "unsigned",
  outcome: { type: "string", length: 24, nullable: true },
  cancel_reason: { type: "string", length: 16, nullable: true },
  created_at: "timestamp",
  updated_at: "timestamp",
} as const satisfies Record<keyof CommandRecord, unknown>;

export const WITHOUT_IMAGES = (Object.keys(COLUMNS) as (keyof CommandRecord)[]).filter((column) => column !== "images");

export const withoutImages = (rows: Omit<CommandRecord, "images">[]): CommandRecord[] => rows.map((row) => ({ ...row, images: [] }));

export class CommandTable {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    ctx.model.extend(COMMAND_TABLE, COLUMNS, { primary: "seq", autoInc: true, unique: ["command_id", "request_key"] });
  }

  /** Inserts a pending command with a fresh id; one with no notice to answer gets `<origin>:<command_id>`. */
  insert(fields: NewRow, now: Date): Promise<CommandRecord> {
    const commandId = `c-${randomUUID()}`;
    return this.#ctx.database.create(
      COMMAND_TABLE,
      pendingRow({ ...fields, command_id: commandId, event_id: fields.event_id ?? `${fields.origin}:${commandId}` }, now),
    );
  }

  async summary(commandId: string): Promise<CommandSummary | undefined> {
    const [record] = withoutImages(await this.#ctx.database.get(COMMAND_TABLE, { command_id: commandId }, { fields: WITHOUT_IMAGES }));
    return record ? summarize(record) : undefined;
  }

  /** Newest first, without image bytes or lease tokens; every session's when `sessionId` is undefined. */
  async list(sessionId: string | undefined, limit: number): Promise<CommandSummary[]> {
    const rows = await this.#ctx.database.get(COMMAND_TABLE, sessionId === undefined ? {} : { session_id: sessionId }, {
      fields: WITHOUT_IMAGES,
      sort: { seq: "desc" },
      limit,
    });
    return withoutImages(rows).map(summarize);
  }

  async countActive(): Promise<number> {
    const count = await this.#ctx.database.eval(COMMAND_TABLE, (row) => koishi.$.count(row.command_id), where({ state: ACTIVE_STATES }));
    return Number(count ?? 0);
  }

  /** Decoded image bytes held by pending and leased commands: what the budget counts. */
  async activeImageBytes(): Promise<number> {
    const sum = await this.#ctx.database.eval(COMMAND_TABLE, (row) => koishi.$.sum(row.image_bytes), where({ state: ACTIVE_STATES }));
    return Number(sum ?? 0);
  }

  /** Removes final commands last changed before `cutoff`; a tombstone is only needed while its request key may be retried, and active commands stay. */
  async prune(cutoff: Date): Promise<number> {
    const result = await this.#ctx.database.remove(COMMAND_TABLE, where({ state: FINAL_STATE_LIST, updated_at: { $lt: cutoff } }));
    return result.removed ?? 0;
  }
}
