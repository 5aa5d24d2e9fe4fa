/**
 * `delivery: "direct"`: a fixed-format message from the configured bot to the configured
 * recipient. No persona, no model. Agent-written text is sent as escaped text elements, never as
 * Satori markup.
 */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { EventBody } from "../../protocol/events.ts";
import { koishi } from "../koishi.ts";
import { BOT_ONLINE, findBot } from "../bot.ts";
import { STATUS_LABELS } from "./labels.ts";
import type { DirectOutcome } from "./steps.ts";

export interface DirectTarget {
  botId: string;
  recipientId: string;
}


export function formatDirectMessage(event: EventBody): string {
  const usage = event.context_usage;
  const context =
    usage === null
      ? "未知"
      : usage.used_tokens === null || usage.percent === null
        ? `未知 / ${usage.context_window} tokens`
        : `${usage.used_tokens} / ${usage.context_window} tokens（${usage.percent}%）`;
  const lines = [
    `【Pi Agent 通知 · ${STATUS_LABELS[event.status]}】`,
    `来源：${event.source || "（无）"}`,
    `任务：${event.task || "（无）"}`,
    // The summary may span lines; its continuation lines are indented, so none can pass for a header or a label.
    `摘要：${(event.summary || "（无）").replace(/\r\n?|[\n\u2028\u2029\u0085]/g, "\n  ")}`,
    `上下文：${context}`,
  ];
  if (event.url) lines.push(`链接：${event.url}`);
  lines.push(`事件：${event.event_id}`);
  return lines.join("\n");
}

export function deliverDirect(ctx: Context, target: DirectTarget, event: EventBody): Promise<DirectOutcome> {
  return sendDirectText(ctx, target, formatDirectMessage(event));
}

/** Sends `text` as escaped text from the configured bot to the configured recipient, once. */
export async function sendDirectText(ctx: Context, target: DirectTarget, text: string): Promise<DirectOutcome> {
  if (!target.botId || !target.recipientId) {
    return { kind: "error", retryable: false, error: "direct_not_configured: 未配置 botId 或 recipientId，无法直接发送" };
  }
  const bot = findBot(ctx, target.botId);
  if (!bot) return { kind: "error", retryable: true, error: `bot_not_found: 找不到机器人 ${target.botId}` };
  if (bot.status !== BOT_ONLINE) return { kind: "error", retryable: true, error: `bot_offline: 机器人 ${target.botId} 不在线` };
  try {
    const ids = await bot.sendPrivateMessage(target.recipientId, koishi.h.text(text));
    return { kind: "delivered", messageId: ids[0] ?? null };
  } catch (error) {
    return { kind: "error", retryable: true, error: `send_failed: ${errorText(error).slice(0, 300)}` };
  }
}
