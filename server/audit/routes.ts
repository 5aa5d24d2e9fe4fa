/** The audit trail's agent route, `POST /audit/tool-calls`. */
import type { Context } from "koishi";
import { ToolCallRecord, type ToolCallRecorded } from "../../protocol/progress.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { SessionBuckets, type RateLimit } from "../rate-limit-rules.ts";
import type { AuditLog } from "./store.ts";

/** The agents' tool-call records have their own buckets, sized like the event limits: per session and per runtime, under a ceiling for the whole token. */
type AuditRoutesDeps = { api: HttpApi; audit: AuditLog; limit: RateLimit; totalLimit: RateLimit };

const PRUNE_INTERVAL_MS = 60_000;

export const AuditRoutes = {
  name: "notify-webhook-audit",
  reusable: true,
  apply(ctx: Context, { api, audit, limit, totalLimit }: AuditRoutesDeps) {
    api.offer(ctx, "audit");

    // One session's refused calls use up its own buckets, never another session's record.
    const buckets = new SessionBuckets(limit, totalLimit, Date.now());
    ctx.setInterval(() => buckets.prune(Date.now()), PRUNE_INTERVAL_MS);
    api.route(ctx, { method: "POST", path: "/audit/tool-calls", auth: "agent" }, async (request) => {
      // Validated first: the buckets are keyed by the body's session and runtime.
      const call = parseWith(ToolCallRecord, request.body);
      const take = buckets.take(call.session_id, call.runtime_id, Date.now());
      if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      // Named, not spread: a field added to the schema later is not stored unseen.
      const { tool, tool_call_id, runtime_id, reason, input, created_at } = call;
      const data = { tool, tool_call_id, runtime_id, reason, input, created_at };
      await audit.record({ actor: "agent", action: `tool_call.${call.decision}`, session_id: call.session_id, subject: call.event_id ?? tool_call_id, data });
      return json(202, { recorded: true } satisfies ToolCallRecorded);
    });
  },
};
