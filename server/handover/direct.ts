/** `delivery: "direct"`: a fixed-format message from the bot to the recipient, no persona; agent text is
 * sent as escaped text elements, never as markup. */
import type { Context } from "koishi";
import { visibleControls } from "../../common/command-text.ts";
import type { EventBody } from "../../protocol/events.ts";
import { CONSOLE_PAGE_PATH } from "../../protocol/wire.ts";
import { koishi } from "../koishi.ts";
import { BOT_ONLINE, findBot } from "../bot.ts";
import { instanceSay, type Say } from "../locales/load.ts";
import { statusLabel } from "../locales/labels.ts";
import { saidSummary } from "../locales/said.ts";
import { failureCause } from "./failure-cause.ts";
import { deliveryError, type DirectOutcome } from "./decisions.ts";

/** A button under a message to the owner: its id comes back in the press; one with `href` opens that link instead. */
export interface OwnerButton {
  id: string;
  label: string;
  href?: string;
}

/** A needs-you notice carries "Open console" where the console has a public address (its `selfUrl`); console/client/index.ts registers the page. */
export function noticeButtons(ctx: Context, event: EventBody, say: Say): OwnerButton[] {
  const config = (ctx.get("console") as { config?: { selfUrl?: string; uiPath?: string } } | undefined)?.config;
  if (event.details?.needs_you !== true || !config?.selfUrl) return [];
  const href = `${config.selfUrl.replace(/\/+$/, "")}${config.uiPath ?? ""}${CONSOLE_PAGE_PATH}`;
  return [{ id: "anon-console", label: say("anon-notify.direct.open-console"), href }];
}

export type DirectTarget = { botId: string; recipientId: string };

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

const SEND_FAILURE_CHARS = 300;

/** Platforms whose adapters turn `<button type="action">` into buttons and a press into `interaction/button`. */
const BUTTON_PLATFORMS: ReadonlySet<string> = new Set(["telegram", "discord"]);

/** Sends `text` as escaped text from the configured bot to the configured recipient, once, with
 * `buttons` where the platform has them (elsewhere the text's own typed answers are the way). */
export async function sendDirectText(ctx: Context, target: DirectTarget, text: string, buttons: readonly OwnerButton[] = []): Promise<DirectOutcome> {
  if (!target.botId || !target.recipientId) {
    return { kind: "error", retryable: false, error: deliveryError(instanceSay(ctx), "direct_not_configured") };
  }
  const bot = findBot(ctx, target.botId);
  if (!bot) return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "bot_not_found", target.botId) };
  if (bot.status !== BOT_ONLINE) return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "bot_offline", target.botId) };
  try {
    const { h } = koishi;
    const shown = BUTTON_PLATFORMS.has(bot.platform ?? "")
      ? buttons.map((b) => h("button", b.href ? { type: "link", href: b.href } : { type: "action", id: b.id }, h.text(b.label)))
      : [];
    const ids = await bot.sendPrivateMessage(target.recipientId, [h.text(text), ...shown]);
    return { kind: "delivered", messageId: ids[0] ?? null };
  } catch (error) {
    return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "send_failed", failureCause(error, SEND_FAILURE_CHARS)) };
  }
}
