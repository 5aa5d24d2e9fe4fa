/** GET /health and GET /recipient: what the extension checks before it enables itself. */
import type { Context } from "koishi";
import type { HealthAnswer } from "../../protocol/status.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { findBot } from "../bot.ts";
import { json, type HttpApi } from "../http/api.ts";
import { packageRoot } from "../package-root.ts";
import type { PersonaSlot } from "../persona/port.ts";
import { chatReachesOwner, noticeFacts, noticeRoute } from "./notices.ts";
import { recipientStatus } from "./recipient.ts";
import type { Pusher } from "../push/pusher.ts";

/** `sessionHeartbeatTimeoutMs`: the server's heartbeat TTL, which the extension paces its heartbeats by. */
type StatusDeps = { api: HttpApi; botId: string; recipientId: string; personas: PersonaSlot; sessionHeartbeatTimeoutMs: number; push?: Pick<Pusher, "health"> };

export const StatusRoutes = {
  name: "notify-webhook-status",
  reusable: true,
  apply(ctx: Context, { api, botId, recipientId, personas, sessionHeartbeatTimeoutMs, push }: StatusDeps) {
    // The nearest package.json of this code's packages above this file.
    const version = packageRoot(import.meta.dirname)?.version ?? "unknown";
    api.route(ctx, { method: "GET", path: "/health", auth: "agent" }, async () => {
      const facts = noticeFacts(ctx, personas, { botId, recipientId });
      return json(200, {
        ok: true,
        version,
        protocol: { ...PROTOCOL_VERSIONS },
        capabilities: api.capabilities,
        session_heartbeat_timeout_ms: sessionHeartbeatTimeoutMs,
        notices: noticeRoute(facts),
        chat: chatReachesOwner(facts),
        push: push ? await push.health() : { route: "none", answers: null, last: null },
      } satisfies HealthAnswer);
    });
    api.route(ctx, { method: "GET", path: "/recipient", auth: "agent" }, async () => json(200, await recipientStatus(findBot(ctx, botId), recipientId)));
  },
};
