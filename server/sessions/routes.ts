/** `POST /sessions/heartbeat` and `POST /sessions/offline`, and the sweep of expired entries. */
import type { Context } from "koishi";
import { Heartbeat, OfflineBody, type HeartbeatAnswer } from "../../protocol/sessions.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { parseWith } from "../errors.ts";
import { json, type HttpApi } from "../http/api.ts";
import type { SessionRegistry } from "./registry.ts";

/** Sweeping only frees memory (lookups check expiry themselves), so it need not run often. */
const SWEEP_INTERVAL_MAX_MS = 10_000;

export interface SessionRoutesDeps {
  api: HttpApi;
  registry: SessionRegistry;
}

export const SessionRoutes = {
  name: "notify-webhook-sessions",
  reusable: true,
  apply(ctx: Context, { api, registry }: SessionRoutesDeps) {
    ctx.setInterval(() => registry.sweep(), Math.min(SWEEP_INTERVAL_MAX_MS, registry.ttlMs));
    api.offer(ctx, "presence");
    api.route(ctx, { method: "POST", path: "/sessions/heartbeat", auth: "agent" }, (request) => {
      registry.record(parseWith(Heartbeat, request.body));
      return json(200, { ttl_ms: registry.ttlMs, server_time: new Date().toISOString(), command_protocol: PROTOCOL_VERSIONS.commands } satisfies HeartbeatAnswer);
    });
    api.route(ctx, { method: "POST", path: "/sessions/offline", auth: "agent" }, (request) => {
      const body = parseWith(OfflineBody, request.body);
      return json(200, { removed: registry.remove(body.session_id, body.runtime_id) });
    });
  },
};
