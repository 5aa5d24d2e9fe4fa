/** The audit trail's agent route, `POST /audit/tool-calls`. */
import type { Context } from "koishi";
import { ToolCallRecord, type ToolCallRecorded } from "../../protocol/progress.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { fullBucket, takeToken, type RateLimit } from "../rate-limit-rules.ts";
import type { AuditLog } from "./store.ts";

export interface AuditRoutesDeps {
  api: HttpApi;
  audit: AuditLog;
  /** The agents' tool-call records have their own bucket, sized like the event limit. */
  limit: RateLimit;
}

export const AuditRoutes = {
  name: "notify-webhook-audit",
  reusable: true,
  apply(ctx: Context, { api, audit, limit }: AuditRoutesDeps) {
    api.offer(ctx, "audit");

    let bucket = fullBucket(limit, Date.now());
    api.route(ctx, { method: "POST", path: "/audit/tool-calls", auth: "agent" }, async (request) => {
      const take = takeToken(bucket, Date.now(), limit);
      bucket = take.bucket;
      if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      const call = parseWith(ToolCallRecord, request.body);
      await audit.record({
        actor: "agent",
        action: `tool_call.${call.decision}`,
        session_id: call.session_id,
        subject: call.event_id ?? call.tool_call_id,
        data: {
          tool: call.tool,
          tool_call_id: call.tool_call_id,
          runtime_id: call.runtime_id,
          reason: call.reason,
          input: call.input,
          created_at: call.created_at,
        },
      });
      return json(202, { recorded: true } satisfies ToolCallRecorded);
    });
  },
};
