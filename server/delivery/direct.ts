/**
 * `delivery: "direct"`: a fixed-format message from the configured bot to the configured
 * recipient. No persona, no model. Agent-written text is sent as escaped text elements, never as
 * Satori markup.
 */
import type { Context } from "koishi";
import { visibleControls } from "../../common/command-text.ts";
import { errorText } from "../../common/errors.ts";
import type { EventBody } from "../../protocol/events.ts";
import { koishi } from "../koishi.ts";
import { BOT_ONLINE, findBot } from "../bot.ts";
import { instanceSay, type Say } from "../locales/load.ts";
import { statusLabel } from "../locales/labels.ts";
import { saidSummary } from "../locales/said.ts";
import { deliveryError, type DirectOutcome } from "./steps.ts";

export interface DirectTarget {
  botId: string;
  recipientId: string;
}

/** The direct notice, in the language `say` speaks. Pure. */
export function formatDirectMessage(event: EventBody, say: Say): string {
  const usage = event.context_usage;
  const none = say("anon-notify.direct.none");
  const context =
    usage === null
      ? say("anon-notify.direct.context-unknown")
      : usage.used_tokens === null || usage.percent === null
        ? say("anon-notify.direct.context-window", { window: usage.context_window })
        : say("anon-notify.direct.context-used", { used: usage.used_tokens, window: usage.context_window, percent: usage.percent });
  const lines = [
    say("anon-notify.direct.header", { status: statusLabel(event.status, say) }),
    say("anon-notify.direct.source", [visibleControls(event.source) || none]),
    say("anon-notify.direct.task", [visibleControls(event.task) || none]),
    // The summary may span lines; its continuation lines are indented, so none can pass for a header or
    // a label, and each line shows its bidi and zero-width characters written out.
    say("anon-notify.direct.summary", [
      (saidSummary(event, say) || none)
        .split(/\r\n?|[\n\u2028\u2029\u0085]/)
        .map(visibleControls)
        .join("\n  "),
    ]),
    say("anon-notify.direct.context", [context]),
  ];
  if (event.url) lines.push(say("anon-notify.direct.link", [event.url]));
  lines.push(say("anon-notify.direct.event", [event.event_id]));
  return lines.join("\n");
}

/** Sends `text` as escaped text from the configured bot to the configured recipient, once. */
export async function sendDirectText(ctx: Context, target: DirectTarget, text: string): Promise<DirectOutcome> {
  if (!target.botId || !target.recipientId) {
    return { kind: "error", retryable: false, error: deliveryError(instanceSay(ctx), "direct_not_configured") };
  }
  const bot = findBot(ctx, target.botId);
  if (!bot) return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "bot_not_found", target.botId) };
  if (bot.status !== BOT_ONLINE) return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "bot_offline", target.botId) };
  try {
    const ids = await bot.sendPrivateMessage(target.recipientId, koishi.h.text(text));
    return { kind: "delivered", messageId: ids[0] ?? null };
  } catch (error) {
    return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "send_failed", errorText(error).slice(0, 300)) };
  }
}
