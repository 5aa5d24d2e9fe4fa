/** Whether the recipient can hear the bot: `ok`/`not_added` only from a real friend list, else `unknown`. */
import type { Bot } from "koishi";
import type { RecipientAnswer } from "../../protocol/status.ts";
import { BOT_ONLINE } from "../bot.ts";

export async function recipientStatus(bot: Bot | undefined, recipientId: string): Promise<RecipientAnswer> {
  const base = { qq: recipientId || null, anon_qq: bot?.selfId ?? null };
  if (!recipientId) return { ...base, status: "unknown", reason: "not_configured" };
  if (!bot) return { ...base, status: "unknown", reason: "bot_not_found" };
  if (bot.status !== BOT_ONLINE) return { ...base, status: "unknown", reason: "bot_offline" };
  if (typeof bot.getFriendList !== "function") return { ...base, status: "unknown", reason: "not_checked" };
  try {
    for await (const friend of bot.getFriendIter()) {
      if (friendId(friend) === recipientId) return { ...base, status: "ok", reason: null };
    }
    return { ...base, status: "not_added", reason: "not_in_friend_list" };
  } catch {
    // A failing friend-list call says nothing about the friendship.
    return { ...base, status: "unknown", reason: "not_checked" };
  }
}

/** Koishi types a friend as `{ user: { id } }`, but the OneBot adapter yields the plain user `{ id, name }`. */
function friendId(friend: unknown): string | undefined {
  const entry = friend as { id?: unknown; user?: { id?: unknown } } | null;
  const id = entry?.user?.id ?? entry?.id;
  return typeof id === "string" || typeof id === "number" ? String(id) : undefined;
}
