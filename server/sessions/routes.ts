/** Presence's surfaces: `POST /sessions/heartbeat` under three rate limits (session, runtime, the whole token), `POST /sessions/offline`, and the
 * expiry sweep. */
import type { Context } from "koishi";
import { Heartbeat, OfflineBody, type HeartbeatAnswer } from "../../protocol/sessions.ts";
import { LIMITS, PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { SessionBuckets, type RateLimit } from "../rate-limit-rules.ts";
import type { SessionRegistry } from "./registry.ts";

/** Sweeping only frees memory (lookups check expiry themselves), so it need not run often. */
const SWEEP_INTERVAL_MAX_MS = 10_000;

/** `limit`: of one session, and likewise of one runtime; `totalLimit`: of the agent token, all sessions together (far above normal use). */
type SessionRoutesDeps = { api: HttpApi; registry: SessionRegistry; limit: RateLimit; totalLimit: RateLimit };

export const SessionRoutes = {
  name: "notify-webhook-sessions",
  reusable: true,
  apply(ctx: Context, { api, registry, limit, totalLimit }: SessionRoutesDeps) {
    // One session's flood (or a Pi in a reload loop) uses up its own buckets, not the others'.
    const buckets = new SessionBuckets(limit, totalLimit, Date.now());
    ctx.setInterval(
      () => {
        registry.sweep();
        buckets.prune(Date.now());
      },
      Math.min(SWEEP_INTERVAL_MAX_MS, registry.ttlMs),
    );
    api.offer(ctx, "presence");
    api.route(ctx, { method: "POST", path: "/sessions/heartbeat", auth: "agent", maxBytes: LIMITS.heartbeatBodyBytes }, (request) => {
      // Validated before the limits: a bad body costs nothing.
      const heartbeat = parseWith(Heartbeat, request.body);
      const now = Date.now();
      const take = buckets.take(heartbeat.session_id, heartbeat.runtime_id, now);
      if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      registry.record(heartbeat);
      const answer: HeartbeatAnswer = { ttl_ms: registry.ttlMs, server_time: new Date(now).toISOString(), command_protocol: PROTOCOL_VERSIONS.commands };
      return json(200, answer);
    });
    api.route(ctx, { method: "POST", path: "/sessions/offline", auth: "agent" }, (request) => {
      const body = parseWith(OfflineBody, request.body);
      return json(200, { removed: registry.remove(body.session_id, body.runtime_id) });
    });
  },
};
