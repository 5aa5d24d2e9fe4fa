/** The audit trail: one durable row per accepted event, tool call, operator request, state change and text
 * that left the server. The actor travels in AsyncLocalStorage; a failed write never fails the action. */
import { AsyncLocalStorage } from "node:async_hooks";
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { AuditActor, AuditEntry, AuditPage, AuditQuery } from "../../protocol/audit.ts";
import { untracedDatabase } from "../koishi.ts";
import { auditData } from "./redaction-rules.ts";
import { instanceSay, type Say } from "../locales/load.ts";

export const AUDIT_TABLE = "anon_notify_audit";

type AuditRow = Omit<AuditEntry, "at"> & { at: Date };

declare module "koishi" {
  interface Tables {
    [AUDIT_TABLE]: AuditRow;
  }
}

export interface AuditInput {
  /** Default: the acting side of the current request (see `AuditLog.as`), else `server`. */
  actor?: AuditActor;
  action: string;
  session_id?: string | null;
  /** The event or command id the row is about. */
  subject?: string | null;
  data?: Record<string, unknown>;
  /** Texts kept whole, never cut (the exact text handed to the persona or sent to the chat; the event's limits bound them), merged over `data`. */
  verbatim?: Record<string, string>;
}

export type AuditDraft = Omit<AuditRow, "id">;

export function retentionCutoff(nowMs: number, retentionDays: number): Date {
  return new Date(nowMs - retentionDays * 86_400_000);
}

function toEntry(row: AuditRow): AuditEntry {
  return { ...row, at: new Date(row.at).toISOString(), data: row.data ?? {} };
}

export class AuditLog {
  /** Taken once and untraced, as in EventStore: a row is written per accepted event. */
  readonly #database: Context["database"];
  // Taken once: a write that fails while the app is being disposed must still be able to say so.
  readonly #logger: ReturnType<Context["logger"]>;
  readonly #say: Say;
  readonly #actor = new AsyncLocalStorage<AuditActor>();
  readonly #listeners = new Set<(entry: AuditEntry) => void>();

  constructor(ctx: Context) {
    this.#database = untracedDatabase(ctx);
    this.#logger = ctx.logger("notify-webhook");
    this.#say = instanceSay(ctx);
    ctx.model.extend(
      AUDIT_TABLE,
      {
        id: "unsigned(8)",
        at: "timestamp",
        actor: "string(16)",
        action: "string(64)",
        session_id: { type: "string", length: 128, nullable: true },
        subject: { type: "string", length: 255, nullable: true },
        data: "json",
      },
      { primary: "id", autoInc: true },
    );
  }

  /** Follows every row written (the console's live timeline); returns the unsubscribe. */
  onRecord(listener: (entry: AuditEntry) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  as<T>(actor: AuditActor, fn: () => T): T {
    return this.#actor.run(actor, fn);
  }

  /** Writes one row; never rejects (the action it describes must not fail because of it). */
  async record(input: AuditInput, at: Date = new Date()): Promise<void> {
    await this.write(this.draft(input, at));
  }

  /** The row `record` would write, with the current actor, for a caller that writes it inside its own transaction. */
  draft(input: AuditInput, at: Date = new Date()): AuditDraft {
    return {
      at,
      actor: input.actor ?? this.#actor.getStore() ?? "server",
      action: input.action,
      session_id: input.session_id ?? null,
      subject: input.subject ?? null,
      data: { ...(auditData(input.data ?? {}) as Record<string, unknown>), ...input.verbatim },
    };
  }

  /** Writes a drafted row through `database` (default: the plugin's); never rejects, as `record`. */
  async write(row: AuditDraft, database: Pick<Context["database"], "create"> = this.#database): Promise<void> {
    let created: AuditRow;
    try {
      created = await database.create(AUDIT_TABLE, row);
    } catch (error) {
      this.#logger.warn(this.#say("anon-notify.log.audit-row", { action: row.action, error: errorText(error) }));
      return;
    }
    for (const listener of this.#listeners) {
      try {
        listener(toEntry(created));
      } catch (error) {
        this.#logger.warn(this.#say("anon-notify.log.audit-listener", { action: row.action, error: errorText(error) }));
      }
    }
  }

  /** Newest first; one row more than asked tells whether an older page exists. */
  async query(query: AuditQuery): Promise<AuditPage> {
    const filter: Record<string, unknown> = {};
    if (query.session_id) filter.session_id = query.session_id;
    if (query.kind) filter.action = { $regex: new RegExp(`^${query.kind}\\.`) };
    if (query.since || query.until) {
      filter.at = { ...(query.since ? { $gte: new Date(query.since) } : {}), ...(query.until ? { $lt: new Date(query.until) } : {}) };
    }
    if (query.before) filter.id = { $lt: query.before };
    const rows = await this.#database.get(AUDIT_TABLE, filter, { sort: { id: "desc" }, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    return { entries: page.map(toEntry), next_before: rows.length > query.limit ? page.at(-1)!.id : null };
  }

  async prune(cutoff: Date): Promise<number> {
    const result = await this.#database.remove(AUDIT_TABLE, { at: { $lt: cutoff } });
    return result.removed ?? 0;
  }
}
