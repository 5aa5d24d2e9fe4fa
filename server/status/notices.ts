/** Where notices end up now, for /health and the start-up line that says when they reach nobody. */
import type { Context } from "koishi";
import type { NoticesAnswer } from "../../protocol/status.ts";
import { BOT_ONLINE, findBot } from "../bot.ts";
import type { DirectTarget } from "../handover/direct.ts";
import { instanceText } from "../locales/load.ts";
import { LOG_PERSONA_NAME } from "../persona/log.ts";
import type { PersonaSlot } from "../persona/port.ts";

/** `persona`: the one present now; `directConfigured`: both `botId` and `recipientId` are. */
export type NoticeFacts = { persona: "real" | "log" | null; directConfigured: boolean; bot: "online" | "offline" | "missing" };

/** A persona (real or log) takes every notice. Without one, only `delivery: "direct"` notices can
 * arrive, through the bot, so `no_persona` stays the reason even when the bot is ready. Pure. */
export function noticeRoute(facts: NoticeFacts): NoticesAnswer {
  if (facts.persona === "real") return { route: "persona", ready: true, reason: null };
  if (facts.persona === "log") return { route: "log", ready: true, reason: null };
  if (!facts.directConfigured) return { route: "none", ready: false, reason: "no_persona" };
  if (facts.bot === "missing") return { route: "direct", ready: false, reason: "bot_not_found" };
  if (facts.bot === "offline") return { route: "direct", ready: false, reason: "bot_offline" };
  return { route: "direct", ready: true, reason: "no_persona" };
}

/** A chat exists that could reach the owner: both ids configured and that bot loaded. Pure. */
export function chatReachesOwner(facts: NoticeFacts): boolean {
  return facts.directConfigured && facts.bot !== "missing";
}

export function noticeFacts(ctx: Context, personas: PersonaSlot, owner: DirectTarget): NoticeFacts {
  const persona = personas.current();
  const bot = findBot(ctx, owner.botId);
  return {
    persona: persona === undefined ? null : persona.name === LOG_PERSONA_NAME ? "log" : "real",
    directConfigured: Boolean(owner.botId && owner.recipientId),
    bot: bot === undefined ? "missing" : bot.status === BOT_ONLINE ? "online" : "offline",
  };
}

/** Says once, after start-up settled, in the instance's language, when notices reach nobody (or only
 * the direct ones do): otherwise every notice would fail `no_persona` with no word in the log. */
export const NoticeRouteReport = {
  name: "notify-webhook-notice-route",
  apply(ctx: Context, { personas, owner }: { personas: PersonaSlot; owner: DirectTarget }) {
    // Flushing from inside a ready listener would wait for itself, so the check runs after it.
    ctx.on("ready", () => void ctx.lifecycle.flush().then(() => ctx.scope.isActive && report(ctx, personas, owner)));
  },
};

function report(ctx: Context, personas: PersonaSlot, owner: DirectTarget): void {
  const facts = noticeFacts(ctx, personas, owner);
  const route = noticeRoute(facts);
  const logger = ctx.logger("notify-webhook");
  // A bot named but not loaded (its adapter plugin missing, or a wrong id) is said whatever the persona.
  if (owner.botId && facts.bot === "missing") logger.warn(instanceText(ctx, "anon-notify.notices.bot-missing", { bot: owner.botId }));
  if (route.route !== "none" && route.route !== "direct") return;
  logger.warn(instanceText(ctx, `anon-notify.notices.start-${route.route}`, {}));
  // A persona loaded later (YesImBot reloaded) makes the warning stale: say so once.
  const stop = personas.onChange(() => {
    if (personas.current() === undefined) return;
    stop();
    logger.info(instanceText(ctx, "anon-notify.notices.persona-arrived", {}));
  });
  ctx.on("dispose", stop);
}
