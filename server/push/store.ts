/** The push receipts and the buttons' capabilities (stored as SHA-256, redeemed at most once). */
import type { Context, Query } from "koishi";
import type { ApprovalDecision } from "../../protocol/approvals.ts";
import type { PushRoute, PushState } from "../../protocol/push.ts";

export interface PushRow {
  /** `event:<event_id>` or `approval:<approval_id>`. */
  push_id: string;
  route: PushRoute;
  kind: "event" | "approval";
  subject: string;
  session_id: string;
  state: PushState;
  attempts: number;
  error: string | null;
  message_id: string | null;
  created_at: Date;
  updated_at: Date;
}

/** `hash`: SHA-256 (hex) of the capability in the button's URL; the capability itself is never stored. */
export type PushAnswerRow = { hash: string; approval_id: string; decision: ApprovalDecision; expires_at: Date; used_at: Date | null };

declare module "koishi" {
  interface Tables {
    anon_notify_push: PushRow;
    anon_notify_push_answer: PushAnswerRow;
  }
}

const PUSH_TABLE = "anon_notify_push";
const ANSWER_TABLE = "anon_notify_push_answer";

export class PushStore {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    ctx.model.extend(
      PUSH_TABLE,
      {
        push_id: { type: "string", length: 200 },
        route: { type: "string", length: 16 },
        kind: { type: "string", length: 16 },
        subject: { type: "string", length: 128 },
        session_id: { type: "string", length: 128 },
        state: { type: "string", length: 16 },
        attempts: "unsigned",
        error: { type: "text", nullable: true },
        message_id: { type: "string", length: 255, nullable: true },
        created_at: "timestamp",
        updated_at: "timestamp",
      },
      { primary: "push_id" },
    );
    ctx.model.extend(
      ANSWER_TABLE,
      {
        hash: { type: "string", length: 64 },
        approval_id: { type: "string", length: 128 },
        decision: { type: "string", length: 16 },
        expires_at: "timestamp",
        used_at: { type: "timestamp", nullable: true },
      },
      { primary: "hash" },
    );
  }

  async get(pushId: string): Promise<PushRow | undefined> {
    return (await this.#ctx.database.get(PUSH_TABLE, { push_id: pushId }))[0];
  }

  /** Creates the receipt unless one exists; true when this call created it. */
  async claim(row: PushRow): Promise<boolean> {
    if (await this.get(row.push_id)) return false;
    try {
      await this.#ctx.database.create(PUSH_TABLE, row);
      return true;
    } catch {
      return false; // another call created it first
    }
  }

  async update(pushId: string, patch: Partial<Omit<PushRow, "push_id">>): Promise<void> {
    await this.#ctx.database.set(PUSH_TABLE, { push_id: pushId }, patch);
  }

  /** Receipts still to be sent, oldest first. */
  async pending(route: PushRoute): Promise<PushRow[]> {
    // minato's query types do not take a list for a union-typed column, which is valid at run time.
    return this.#ctx.database.get(PUSH_TABLE, { route, state: ["queued", "retrying"] } as Query<PushRow>, { sort: { created_at: "asc" } });
  }

  async newest(route: PushRoute): Promise<PushRow | undefined> {
    return (await this.#ctx.database.get(PUSH_TABLE, { route }, { sort: { updated_at: "desc" }, limit: 1 }))[0];
  }

  async addAnswer(row: PushAnswerRow): Promise<void> {
    await this.#ctx.database.create(ANSWER_TABLE, row);
  }

  async answer(hash: string): Promise<PushAnswerRow | undefined> {
    return (await this.#ctx.database.get(ANSWER_TABLE, { hash }))[0];
  }

  /** Marks a capability used if nobody has; true when this call did (of two presses exactly one wins). */
  async redeem(hash: string, at: Date): Promise<boolean> {
    const { matched } = await this.#ctx.database.set(ANSWER_TABLE, { hash, used_at: { $exists: false } }, { used_at: at });
    return matched === 1;
  }

  /** Gives a capability back when its decision failed for a reason that was not the answer's (the database, say). */
  async release(hash: string): Promise<void> {
    await this.#ctx.database.set(ANSWER_TABLE, { hash }, { used_at: null });
  }

  /** Removes capabilities whose approval's time is over (they can never be redeemed), and final receipts last changed before `receiptsBefore`. */
  async prune(now: Date, receiptsBefore: Date): Promise<void> {
    await this.#ctx.database.remove(ANSWER_TABLE, { expires_at: { $lt: now } });
    await this.#ctx.database.remove(PUSH_TABLE, { state: ["delivered", "failed"], updated_at: { $lt: receiptsBefore } } as Query<PushRow>);
  }
}
