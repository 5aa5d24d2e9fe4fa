/** Telegram's command menu holds flat names only, so a Telegram bot's menu also lists each `anon`
 * subcommand under its flat alias (`/anon_sessions`). */
import type { Bot, Context, Universal } from "koishi";
import { BOT_ONLINE } from "../bot.ts";
import { flatName } from "./kit.ts";

/** The platforms whose menus get the flat names. */
const FLAT_MENU_PLATFORMS = new Set(["telegram"]);

/** `commands` plus, for `group`, each child as a top-level entry under its flat name. Pure. */
export function withFlatCommands(commands: readonly Universal.Command[], group: string): Universal.Command[] {
  const flat = commands
    .filter((command) => command.name === group)
    .flatMap((command) => command.children.map((child) => ({ ...child, name: flatName(child.name), children: [] })));
  return [...commands, ...flat];
}

export function flatCommandMenus(ctx: Context, group: string): void {
  const wrapped = new WeakSet<Bot>();
  const wrap = (bot: Bot) => {
    const original = bot.updateCommands;
    if (!FLAT_MENU_PLATFORMS.has(bot.platform ?? "") || typeof original !== "function" || wrapped.has(bot)) return;
    wrapped.add(bot);
    bot.updateCommands = (commands) => original.call(bot, withFlatCommands(commands, group));
    ctx.on("dispose", () => {
      bot.updateCommands = original;
    });
    // A bot online before this plugin came registered its menu without the flat names.
    if (bot.status === BOT_ONLINE) void ctx.$commander.updateCommands(bot);
  };
  for (const bot of ctx.bots) wrap(bot);
  ctx.on("bot-connect", (bot) => wrap(bot));
}
