/** Presence's surfaces over the heartbeat service, `POST /sessions/offline`, and the expiry sweep. */
import type { Context } from "koishi";
import { OfflineBody } from "../../protocol/sessions.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { parseWith } from "../../common/domain-error.ts";
import { json, type HttpApi } from "../http/api.ts";
import { HeartbeatService, type HeartbeatLimits } from "./heartbeats.ts";
import type { SessionRegistry } from "./registry.ts";

/** Sweeping only frees memory (lookups check expiry themselves), so it need not run often. */
const SWEEP_INTERVAL_MAX_MS = 10_000;

export const SessionRoutes = {
  name: "notify-webhook-sessions",
  reusable: true,
  apply(ctx: Context, { api, registry, ...limits }: HeartbeatLimits & { api: HttpApi; registry: SessionRegistry }) {
    const heartbeats = new HeartbeatService(registry, limits);
    ctx.setInterval(
      () => {
        registry.sweep();
        heartbeats.prune();
      },
      Math.min(SWEEP_INTERVAL_MAX_MS, registry.ttlMs),
    );
    api.offer(ctx, "presence");
    api.route(ctx, { method: "POST", path: "/sessions/heartbeat", auth: "agent", maxBytes: LIMITS.heartbeatBodyBytes }, (request) =>
      json(200, heartbeats.receive(request.body)),
    );
    api.route(ctx, { method: "POST", path: "/sessions/offline", auth: "agent" }, (request) => {
      const body = parseWith(OfflineBody, request.body);
      return json(200, { removed: registry.remove(body.session_id, body.runtime_id) });
    });
  },
};
