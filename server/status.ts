/**
 * GET /health and GET /recipient: what the extension checks before it enables itself.
 * The recipient is reported `ok`/`not_added` only from the bot's real friend list; anything the
 * bot cannot tell for sure is `unknown`, never a guess.
 */
import { readFileSync } from "node:fs";
import type { Bot, Context } from "koishi";
import { type HealthAnswer, type RecipientAnswer } from "../protocol/status.ts";
import { PROTOCOL_VERSIONS } from "../protocol/wire.ts";
import { json, type HttpApi } from "./http.ts";
import type { Config } from "./notify-webhook.ts";

export interface StatusDeps {
  config: Config;
  api: HttpApi;
}

export const StatusRoutes = {
  name: "notify-webhook-status",
  reusable: true,
  apply(ctx: Context, { config, api }: StatusDeps) {
    const version = packageVersion();
    api.route(ctx, { method: "GET", path: "/health", auth: "agent" }, () =>
      json(200, {
        ok: true,
        version,
        protocol: { ...PROTOCOL_VERSIONS },
        capabilities: api.capabilities,
        session_heartbeat_timeout_ms: config.sessionHeartbeatTimeoutMs,
      } satisfies HealthAnswer),
    );
    api.route(ctx, { method: "GET", path: "/recipient", auth: "agent" }, async () =>
      json(200, await recipientStatus(findBot(ctx, config.botId), config.recipientId)),
    );
  },
};

/** The configured bot (`platform:selfId`), if it is loaded. */
export function findBot(ctx: Context, botId: string): Bot | undefined {
  return botId ? ctx.bots[botId] : undefined;
}

export async function recipientStatus(bot: Bot | undefined, recipientId: string): Promise<RecipientAnswer> {
  const base = { qq: recipientId || null, anon_qq: bot?.selfId ?? null };
  if (!recipientId) return { ...base, status: "unknown", reason: "not_configured" };
  if (!bot) return { ...base, status: "unknown", reason: "bot_not_found" };
  if (bot.status !== 1 /* Universal.Status.ONLINE */) return { ...base, status: "unknown", reason: "bot_offline" };
  if (typeof bot.getFriendList !== "function") return { ...base, status: "unknown", reason: "not_checked" };
  try {
    for await (const friend of bot.getFriendIter()) {
      if (friend.user?.id === recipientId) return { ...base, status: "ok", reason: null };
    }
    return { ...base, status: "not_added", reason: "not_in_friend_list" };
  } catch {
    // A failing friend-list call says nothing about the friendship.
    return { ...base, status: "unknown", reason: "not_checked" };
  }
}

let cachedVersion: string | undefined;
/** The package version, from the nearest package.json above this file (source or dist/). */
function packageVersion(): string {
  if (cachedVersion) return cachedVersion;
  for (const relative of ["../package.json", "../../package.json"]) {
    try {
      const manifest = JSON.parse(readFileSync(new URL(relative, import.meta.url), "utf8")) as { name?: string; version?: string };
      if (manifest.name === "@cr1ms0n/anon-notify" && manifest.version) return (cachedVersion = manifest.version);
    } catch {
      // not at this level
    }
  }
  return (cachedVersion = "unknown");
}
