/**
 * The audit trail (seed 003 §5: 记录每次工具调用的完整入参 + 最终发送内容): one durable row per accepted
 * event, persona tool call, operator request, command state change, watchdog episode and the exact
 * text handed to the persona or sent directly, with its time and acting side. Tokens never reach
 * it: inputs pass through `auditData`, which drops secret-named keys and turns images into count,
 * bytes and digests.
 *
 * The acting side travels with the request (AsyncLocalStorage), so a store deep below a route
 * records who asked without every signature carrying it. Writing an audit row never fails the
 * action it describes: a failed write is logged and the action goes on.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";
import type { Context } from "koishi";
import {
  AuditQuery,
  Id,
  ToolCallRecord,
  type AuditActor,
  type AuditEntry,
  type AuditPage,
  type ToolCallRecorded,
} from "../protocol.ts";
import { HttpError, json, parseWith, type HttpApi } from "./http.ts";
import { fullBucket, takeToken, type RateLimit } from "./rate-limit.ts";
import type { ToolDefinition } from "./yesimbot-tools.ts";

export const AUDIT_TABLE = "anon_notify_audit";
const DAY_MS = 24 * 60 * 60 * 1000;
const PRUNE_INTERVAL_MS = 60 * 60 * 1000;
/** Longer strings are cut: the trail records what was said, not unbounded blobs. */
const MAX_STRING_CHARS = 16_000;
/** `token`, `lease_token`, `operatorToken`, `authorization`…; not `used_tokens` or `max_tokens`. */
const SECRET_KEY = /(^|[_-])(token|secret|password|authorization)$|[a-z](Token|Secret|Password)$/i;

export interface AuditRow {
  id: number;
  at: Date;
  actor: AuditActor;
  action: string;
  session_id: string | null;
  subject: string | null;
  data: Record<string, unknown>;
}

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
}

// ── Pure helpers ────────────────────────────────────────────────────────────

export interface ImageDigest {
  count: number;
  bytes: number;
  sha256: string[];
}

/** What the trail keeps of images: how many, how large, and a digest of each; never the bytes. */
export function imageFacts(images: readonly unknown[]): ImageDigest {
  const digests: string[] = [];
  let bytes = 0;
  for (const image of images) {
    const data = typeof image === "object" && image !== null && typeof (image as { data?: unknown }).data === "string" ? (image as { data: string }).data : "";
    const decoded = Buffer.from(data, "base64");
    bytes += decoded.length;
    digests.push(createHash("sha256").update(decoded).digest("hex"));
  }
  return { count: images.length, bytes, sha256: digests };
}

/** A JSON-safe copy fit for the trail: secret-named keys dropped, images digested, long strings cut. */
export function auditData(value: unknown): unknown {
  if (typeof value === "string") return value.length > MAX_STRING_CHARS ? `${value.slice(0, MAX_STRING_CHARS)}…` : value;
  if (value === null || typeof value !== "object") return typeof value === "bigint" ? String(value) : value;
  if (value instanceof Date) return value.toISOString();
  if (Array.isArray(value)) return value.map(auditData);
  const copy: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    if (item === undefined || SECRET_KEY.test(key)) continue;
    copy[key] = key === "images" && Array.isArray(item) ? imageFacts(item) : auditData(item);
  }
  return copy;
}

/** Rows older than this are pruned. */
export function retentionCutoff(nowMs: number, retentionDays: number): Date {
  return new Date(nowMs - retentionDays * DAY_MS);
}

export function toEntry(row: AuditRow): AuditEntry {
  return {
    id: row.id,
    at: new Date(row.at).toISOString(),
    actor: row.actor,
    action: row.action,
    session_id: row.session_id,
    subject: row.subject,
    data: row.data ?? {},
  };
}

// ── The store ───────────────────────────────────────────────────────────────

export function declareAuditTable(ctx: Context): void {
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

export class AuditLog {
  readonly #ctx: Context;
  // Taken once: a write that fails while the app is being disposed must still be able to say so.
  readonly #logger: ReturnType<Context["logger"]>;
  readonly #actor = new AsyncLocalStorage<AuditActor>();
  readonly #listeners = new Set<(entry: AuditEntry) => void>();

  constructor(ctx: Context) {
    this.#ctx = ctx;
    this.#logger = ctx.logger("notify-webhook");
    declareAuditTable(ctx);
  }

  /** Follows every row written (the console's live timeline); returns the unsubscribe. */
  onRecord(listener: (entry: AuditEntry) => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  /** Runs `fn` with `actor` as the acting side of every row recorded inside it. */
  as<T>(actor: AuditActor, fn: () => T): T {
    return this.#actor.run(actor, fn);
  }

  /** Writes one row; never rejects (the action it describes must not fail because of it). */
  async record(input: AuditInput, at: Date = new Date()): Promise<void> {
    const row = {
      at,
      actor: input.actor ?? this.#actor.getStore() ?? "server",
      action: input.action,
      session_id: input.session_id ?? null,
      subject: input.subject ?? null,
      data: (auditData(input.data ?? {}) ?? {}) as Record<string, unknown>,
    };
    let created: AuditRow;
    try {
      created = await this.#ctx.database.create(AUDIT_TABLE, row);
    } catch (error) {
      this.#logger.warn("audit row %s not written: %s", input.action, error instanceof Error ? error.message : String(error));
      return;
    }
    for (const listener of this.#listeners) {
      try {
        listener(toEntry(created));
      } catch (error) {
        this.#logger.warn("audit listener failed on %s: %s", input.action, error instanceof Error ? error.message : String(error));
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
    const rows = await this.#ctx.database.get(AUDIT_TABLE, filter, { sort: { id: "desc" }, limit: query.limit + 1 });
    const page = rows.slice(0, query.limit);
    return { entries: page.map(toEntry), next_before: rows.length > query.limit ? page.at(-1)!.id : null };
  }

  /** Removes rows older than `cutoff`; returns how many went. */
  async prune(cutoff: Date): Promise<number> {
    const result = await this.#ctx.database.remove(AUDIT_TABLE, { at: { $lt: cutoff } });
    return result.removed ?? 0;
  }
}

// ── Routes and retention ────────────────────────────────────────────────────

export interface AuditRoutesDeps {
  api: HttpApi;
  audit: AuditLog;
  retentionDays: number;
  /** The agents' tool-call records have their own bucket, sized like the event limit. */
  limit: RateLimit;
}

/** `GET /operator/audit`, `POST /audit/tool-calls`, and pruning at start and every hour. */
export const AuditRoutes = {
  name: "notify-webhook-audit",
  reusable: true,
  apply(ctx: Context, { api, audit, retentionDays, limit }: AuditRoutesDeps) {
    const logger = ctx.logger("notify-webhook");
    const prune = async () => {
      try {
        const removed = await audit.prune(retentionCutoff(Date.now(), retentionDays));
        if (removed > 0) logger.info("audit: pruned %d rows older than %d days", removed, retentionDays);
      } catch (error) {
        logger.warn("audit pruning failed: %s", error instanceof Error ? error.message : String(error));
      }
    };
    const release = api.holdUntilReady(ctx);
    ctx.on("ready", async () => {
      await prune();
      release();
    });
    ctx.setInterval(() => void prune(), PRUNE_INTERVAL_MS);
    api.offer(ctx, "audit");

    api.route(ctx, { method: "GET", path: "/operator/audit", auth: "operator" }, async (request) => {
      const query = parseWith(AuditQuery, Object.fromEntries(request.query));
      return json(200, await audit.query(query));
    });

    let bucket = fullBucket(limit, Date.now());
    api.route(ctx, { method: "POST", path: "/audit/tool-calls", auth: "agent" }, async (request) => {
      const take = takeToken(bucket, Date.now(), limit);
      bucket = take.bucket;
      if (!take.allowed) throw new HttpError(429, "rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      const call = parseWith(ToolCallRecord, request.body);
      await audit.record({
        actor: "agent",
        action: `tool_call.${call.decision}`,
        session_id: call.session_id,
        subject: call.event_id ?? call.tool_call_id,
        data: { tool: call.tool, tool_call_id: call.tool_call_id, runtime_id: call.runtime_id, reason: call.reason, input: call.input, created_at: call.created_at },
      });
      return json(202, { recorded: true } satisfies ToolCallRecorded);
    });
  },
};

/** A persona tool that records each call (who, where, inputs, outcome) and runs as the persona. */
export function auditedTool(definition: ToolDefinition, audit: AuditLog): ToolDefinition {
  return {
    ...definition,
    execute: async (args) => {
      let outcome: { status: string; error: unknown } = { status: "exception", error: null };
      try {
        const result = await audit.as("persona", () => definition.execute(args));
        outcome = { status: result.status, error: result.error ?? null };
        return result;
      } catch (error) {
        outcome.error = error instanceof Error ? error.message : String(error);
        throw error;
      } finally {
        const { session, ...input } = args;
        const sessionId = typeof input.session_id === "string" && Id.safeParse(input.session_id).success ? input.session_id : null;
        await audit.record({
          actor: "persona",
          action: `persona.${definition.name}`,
          session_id: sessionId,
          subject: typeof input.command_id === "string" ? input.command_id : typeof input.event_id === "string" ? input.event_id : null,
          data: { input, chat: session ? { user_id: session.userId ?? null, channel_id: session.channelId ?? null, direct: session.isDirect } : null, ...outcome },
        });
      }
    },
  };
}
