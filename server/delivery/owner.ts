/**
 * Messages to the owner that are not events (an approval's request and closing message): sent by
 * the configured bot to the configured recipient as escaped text. Throws when it cannot send, so
 * the caller retries; answers the platform's message id, which quote replies point at.
 */
import type { Context } from "koishi";
import { koishi } from "../koishi.ts";
import { BOT_ONLINE, findBot } from "./bot.ts";
import type { DirectTarget } from "./direct.ts";

export async function sendToOwner(ctx: Context, target: DirectTarget, text: string): Promise<string | null> {
  if (!target.botId || !target.recipientId) throw new Error("direct_not_configured: 未配置 botId 或 recipientId");
  const bot = findBot(ctx, target.botId);
  if (!bot) throw new Error(`bot_not_found: 找不到机器人 ${target.botId}`);
  if (bot.status !== BOT_ONLINE) throw new Error(`bot_offline: 机器人 ${target.botId} 不在线`);
  const ids = await bot.sendPrivateMessage(target.recipientId, koishi.h.text(text));
  return ids[0] ?? null;
}
