/** `POST /sessions/heartbeat` and `POST /sessions/offline`, and the sweep of expired entries. */
import type { Context } from "koishi";
import { Heartbeat, OfflineBody, type HeartbeatAnswer } from "../../protocol/sessions.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../errors.ts";
import { json, type HttpApi } from "../http/api.ts";
import { KeyedBuckets, fullBucket, takeFromAll, type Bucket, type RateLimit } from "../rate-limit.ts";
import type { SessionRegistry } from "./registry.ts";

/** Sweeping only frees memory (lookups check expiry themselves), so it need not run often. */
const SWEEP_INTERVAL_MAX_MS = 10_000;

export interface SessionRoutesDeps {
  api: HttpApi;
  registry: SessionRegistry;
  /** Heartbeats of one session, and likewise of one runtime. */
  limit: RateLimit;
  /** Heartbeats of the one agent token, all sessions together: a ceiling far above normal use. */
  totalLimit: RateLimit;
}

export const SessionRoutes = {
  name: "notify-webhook-sessions",
  reusable: true,
  apply(ctx: Context, { api, registry, limit, totalLimit }: SessionRoutesDeps) {
    // One session's flood (or a Pi in a reload loop) uses up its own buckets, not the others'.
    const bySession = new KeyedBuckets(limit);
    const byRuntime = new KeyedBuckets(limit);
    let total = fullBucket(totalLimit, Date.now());
    ctx.setInterval(
      () => {
        registry.sweep();
        bySession.prune(Date.now());
        byRuntime.prune(Date.now());
      },
      Math.min(SWEEP_INTERVAL_MAX_MS, registry.ttlMs),
    );
    api.offer(ctx, "presence");
    api.route(ctx, { method: "POST", path: "/sessions/heartbeat", auth: "agent" }, (request) => {
      const heartbeat = parseWith(Heartbeat, request.body);
      const now = Date.now();
      const take = takeFromAll(
        [
          { bucket: bySession.get(heartbeat.session_id, now), limit },
          { bucket: byRuntime.get(heartbeat.runtime_id, now), limit },
          { bucket: total, limit: totalLimit },
        ],
        now,
      );
      const [session, runtime, all] = take.buckets as [Bucket, Bucket, Bucket];
      bySession.set(heartbeat.session_id, session);
      byRuntime.set(heartbeat.runtime_id, runtime);
      total = all;
      if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
      registry.record(heartbeat);
      return json(200, {
        ttl_ms: registry.ttlMs,
        server_time: new Date().toISOString(),
        command_protocol: PROTOCOL_VERSIONS.commands,
      } satisfies HeartbeatAnswer);
    });
    api.route(ctx, { method: "POST", path: "/sessions/offline", auth: "agent" }, (request) => {
      const body = parseWith(OfflineBody, request.body);
      return json(200, { removed: registry.remove(body.session_id, body.runtime_id) });
    });
  },
};
