/** The `anon_notify_approval` table: every state change is conditional on the state it was decided on, so
 * of two racing decisions exactly one lands. */
import type { Context, Query } from "koishi";
import { ApprovalState, OPEN_APPROVAL_STATES } from "../../protocol/approvals.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { ApprovalPatch, ApprovalRecord, Transition } from "./decisions.ts";

declare module "koishi" {
  interface Tables {
    anon_notify_approval: ApprovalRecord;
  }
}

export type Marks = Pick<ApprovalPatch, "request_sent" | "request_held" | "request_message_id" | "persona_mentioned" | "closing_sent">;
export const APPROVAL_TABLE = "anon_notify_approval";
const MAX_RACE_RETRIES = 5;
const CLOSED = ApprovalState.options.filter((state) => !OPEN_APPROVAL_STATES.includes(state));

/** minato's query types do not accept a list for a union-typed column, which is valid at run time. */
const where = (query: Partial<Record<keyof ApprovalRecord, unknown>>): Query<ApprovalRecord> => query as Query<ApprovalRecord>;

export class ApprovalStore {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    ctx.model.extend(
      APPROVAL_TABLE,
      {
        seq: "unsigned",
        approval_id: { type: "string", length: 128 },
        code: { type: "string", length: 8 },
        session_id: { type: "string", length: 128 },
        runtime_id: { type: "string", length: 128 },
        run_id: { type: "string", length: 128 },
        tool_call_id: { type: "string", length: 256 },
        tool: { type: "string", length: 128 },
        args_digest: { type: "string", length: 64 },
        cwd: "text",
        action: { type: "string", length: 64 },
        action_code: { type: "string", length: 64, nullable: true },
        reason: "text",
        command: "text",
        command_hidden_chars: "unsigned",
        argv: { type: "json", nullable: true },
        agent_uid: { type: "unsigned", nullable: true },
        rules: "json",
        matched: { type: "json", nullable: true },
        grantable: "boolean",
        preview: "text",
        source: { type: "string", length: 16 },
        request_digest: { type: "string", length: 64 },
        state: { type: "string", length: 16 },
        decision: { type: "string", length: 16, nullable: true },
        decision_reason: { type: "text", nullable: true },
        decided_by: { type: "string", length: 255, nullable: true },
        via: { type: "string", length: 16, nullable: true },
        outcome_reason: { type: "text", nullable: true },
        created_at: "timestamp",
        expires_at: "timestamp",
        decided_at: { type: "timestamp", nullable: true },
        resolved_at: { type: "timestamp", nullable: true },
        request_message_id: { type: "string", length: 255, nullable: true },
        request_sent: "boolean",
        request_held: { type: "boolean", initial: false },
        persona_mentioned: "boolean",
        closing_sent: "boolean",
        grant_id: { type: "string", length: 8, nullable: true },
        grant_use: { type: "unsigned", nullable: true },
      },
      { primary: "seq", autoInc: true, unique: ["approval_id"] },
    );
  }

  async get(approvalId: string): Promise<ApprovalRecord | undefined> {
    return (await this.#ctx.database.get(APPROVAL_TABLE, { approval_id: approvalId }))[0];
  }

  /** The newest approval with this code: an open one while it is open, else the last one that had it (a late answer). */
  async byCode(code: string): Promise<ApprovalRecord | undefined> {
    return (await this.#ctx.database.get(APPROVAL_TABLE, { code }, { sort: { seq: "desc" }, limit: 1 }))[0];
  }

  async byRequestMessage(messageId: string): Promise<ApprovalRecord | undefined> {
    return (await this.#ctx.database.get(APPROVAL_TABLE, { request_message_id: messageId }, { limit: 1 }))[0];
  }

  /** The first approval asked for this exact call (a second request for it is answered with this one). */
  async byCall(sessionId: string, toolCallId: string, argsDigest: string): Promise<ApprovalRecord | undefined> {
    const call = { session_id: sessionId, tool_call_id: toolCallId, args_digest: argsDigest };
    return (await this.#ctx.database.get(APPROVAL_TABLE, call, { sort: { seq: "asc" }, limit: 1 }))[0];
  }

  async openCodes(): Promise<Set<string>> {
    const rows = await this.#ctx.database.get(APPROVAL_TABLE, where({ state: OPEN_APPROVAL_STATES }), ["code"]);
    return new Set(rows.map((row) => row.code));
  }

  async create(record: Omit<ApprovalRecord, "seq">): Promise<ApprovalRecord> {
    return this.#ctx.database.create(APPROVAL_TABLE, record);
  }

  async list(filter: { states?: readonly ApprovalState[]; sessionId?: string | undefined; limit: number; offset?: number }): Promise<ApprovalRecord[]> {
    const query = { ...(filter.states && { state: filter.states }), ...(filter.sessionId && { session_id: filter.sessionId }) };
    return this.#ctx.database.get(APPROVAL_TABLE, where(query), { sort: { seq: "desc" }, limit: filter.limit, offset: filter.offset ?? 0 });
  }

  async count(states: readonly ApprovalState[]): Promise<number> {
    return (await this.#ctx.database.get(APPROVAL_TABLE, where({ state: states }), ["seq"])).length;
  }

  /** Removes closed approvals created before `cutoff` whose messages have all gone out; open or owing ones stay however old. */
  async prune(cutoff: Date): Promise<number> {
    const done = where({ state: CLOSED, created_at: { $lt: cutoff }, request_sent: true, persona_mentioned: true, closing_sent: true });
    return (await this.#ctx.database.remove(APPROVAL_TABLE, done)).removed ?? 0;
  }

  /** Rows with a message still owed to the owner or the persona (an open one's closing is not owed yet). */
  async owing(): Promise<ApprovalRecord[]> {
    const owing = {
      $or: [{ request_sent: false, request_held: false, state: OPEN_APPROVAL_STATES }, { persona_mentioned: false }, { closing_sent: false, state: CLOSED }],
    } as Query<ApprovalRecord>;
    return this.#ctx.database.get(APPROVAL_TABLE, owing, { sort: { seq: "asc" } });
  }

  /** Decides on a fresh read and writes only if the row is still in the state decided on; a lost race is decided again. */
  async transition(approvalId: string, decide: (record: ApprovalRecord | undefined) => Transition): Promise<{ record: ApprovalRecord; changed: boolean }> {
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      const record = await this.get(approvalId);
      const decision = decide(record);
      if (decision.kind === "refuse") throw new DomainError(decision.error, decision.state ? { state: decision.state } : {});
      if (!record) throw new DomainError("not_found");
      if (decision.kind === "unchanged") return { record, changed: false };
      const { matched } = await this.#ctx.database.set(APPROVAL_TABLE, where({ approval_id: approvalId, state: decision.from }), decision.patch);
      if (matched === 1) return { record: { ...record, ...decision.patch }, changed: true };
    }
    throw new DomainError("not_ready", { retryAfterSeconds: 1 });
  }

  /** Book-keeping of what was sent; not a state change, so no guard on the state. */
  async mark(approvalId: string, patch: Marks): Promise<void> {
    await this.#ctx.database.set(APPROVAL_TABLE, { approval_id: approvalId }, patch);
  }

  /** The pending approvals whose request was held for a digest, oldest first: their ids. */
  async heldWaiting(): Promise<string[]> {
    const rows = await this.#ctx.database.get(APPROVAL_TABLE, where({ state: "pending", request_held: true, request_sent: false }), ["approval_id"]);
    return rows.map((row) => row.approval_id);
  }

  async openFor(filter: { sessionId?: string; notRuntime?: string }): Promise<ApprovalRecord[]> {
    const query: Partial<Record<keyof ApprovalRecord, unknown>> = { state: OPEN_APPROVAL_STATES };
    if (filter.sessionId) query.session_id = filter.sessionId;
    if (filter.notRuntime) query.runtime_id = { $ne: filter.notRuntime };
    return this.#ctx.database.get(APPROVAL_TABLE, where(query));
  }
}
