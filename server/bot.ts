/** The configured bot (`platform:selfId`): what direct sends, the persona adapter and /recipient use. */
import type { Bot, Context } from "koishi";

/** Universal.Status.ONLINE: only an online bot can send or be asked for its friends. */
export const BOT_ONLINE = 1;

export function findBot(ctx: Context, botId: string): Bot | undefined {
  return botId ? ctx.bots[botId] : undefined;
}
