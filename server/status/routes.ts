/** GET /health and GET /recipient: what the extension checks before it enables itself. */
import { readFileSync } from "node:fs";
import type { Context } from "koishi";
import type { HealthAnswer } from "../../protocol/status.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { findBot } from "../delivery/bot.ts";
import { json, type HttpApi } from "../http/api.ts";
import { recipientStatus } from "./recipient.ts";

export interface StatusDeps {
  api: HttpApi;
  botId: string;
  recipientId: string;
  /** The server's heartbeat TTL, which the extension paces its heartbeats by. */
  sessionHeartbeatTimeoutMs: number;
}

export const StatusRoutes = {
  name: "notify-webhook-status",
  reusable: true,
  apply(ctx: Context, { api, botId, recipientId, sessionHeartbeatTimeoutMs }: StatusDeps) {
    const version = packageVersion();
    api.route(ctx, { method: "GET", path: "/health", auth: "agent" }, () =>
      json(200, {
        ok: true,
        version,
        protocol: { ...PROTOCOL_VERSIONS },
        capabilities: api.capabilities,
        session_heartbeat_timeout_ms: sessionHeartbeatTimeoutMs,
      } satisfies HealthAnswer),
    );
    api.route(ctx, { method: "GET", path: "/recipient", auth: "agent" }, async () => json(200, await recipientStatus(findBot(ctx, botId), recipientId)));
  },
};

let cachedVersion: string | undefined;
/** The package version, from the nearest package.json above this file (source server/status/ or dist/server/status/). */
function packageVersion(): string {
  if (cachedVersion) return cachedVersion;
  for (const relative of ["../../package.json", "../../../package.json"]) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (manifest.name === "@cr1ms0n/anon-notify" && manifest.version) return (cachedVersion = manifest.version);
    } catch {
      // not at this level
    }
  }
  return (cachedVersion = "unknown");
}
