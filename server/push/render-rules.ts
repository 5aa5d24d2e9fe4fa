/** What the phone push says and at which priority (the server's choice): every line starts with the server's
 * words, at most one agent field per line, and no agent field becomes a URL, topic or attachment. */
import { basename } from "node:path";
import { isServerEventId, type EventBody } from "../../protocol/events.ts";
import type { ApprovalRecord } from "../approvals/decisions.ts";
import { actionText, durationText, oneLine, shownCommand, type Voice } from "../approvals/message-rules.ts";
import { statusLabel } from "../locales/labels.ts";
import type { Say } from "../locales/load.ts";
import { saidSummary } from "../locales/said.ts";
import { isUrgent, type UrgentKind } from "../mute/decisions.ts";

/** ntfy's message limit is 4,096 bytes; longer ones become attachments. */
const MESSAGE_BYTES = 4000;
/** The most one agent-made field may take of a message. */
const FIELD_BYTES = { short: 240, long: 1500 } as const;
/** How much of a command the push shows before cutting to head and tail. */
const PUSH_COMMAND_CHARS = 600;

type PushAction = { action: "http" | "view"; label: string; url: string; method?: "POST"; clear?: boolean };

/** The JSON publish body without the topic (the target adds it). */
export type PushMessage = { title: string; message: string; priority: 1 | 2 | 3 | 4 | 5; tags: string[]; actions?: PushAction[] };

/** Whether a notice is pushed, at which priority and with which tags; null when it is not. `noBot`: no bot and recipient are configured, so the push
 * is where `delivery: "direct"` notices go; `completions`: completed runs are pushed too (`ntfyCompletions`); `muted`: the session is muted now. */
export function pushPlan(
  event: EventBody,
  facts: { noBot: boolean; completions: boolean; muted: boolean; breakThrough: readonly UrgentKind[] },
): Pick<PushMessage, "priority" | "tags"> | null {
  // The approval's mention to the persona: the request itself is pushed on its own.
  if (event.event_id.startsWith("approval:")) return null;
  if (facts.muted && !isUrgent(event, facts.breakThrough)) return null;
  const details = event.details ?? {};
  if (details.needs_you === true) return { priority: 4, tags: ["warning"] };
  if (isServerEventId(event.event_id) && details.watchdog != null) return { priority: 4, tags: ["warning"] };
  if (event.status === "failed") return { priority: 3, tags: ["x"] };
  if (event.status === "completed" && facts.completions) return { priority: 2, tags: ["white_check_mark"] };
  if (event.delivery === "direct" && facts.noBot) return { priority: 3, tags: [] };
  return null;
}

/** An agent-made field on one line, at most `bytes` UTF-8 bytes (whole code points, `…` when cut). Pure. */
function pushField(text: string, bytes: number = FIELD_BYTES.short): string {
  return clipBytes(oneLine(text), bytes);
}

function clipBytes(text: string, bytes: number): string {
  if (Buffer.byteLength(text) <= bytes) return text;
  let out = "";
  let used = 0;
  for (const char of text) {
    const size = Buffer.byteLength(char);
    if (used + size > bytes - 3) break;
    out += char;
    used += size;
  }
  return `${out}…`;
}

/** A notice as a push: the server's title, then source, task, summary and event id on a line each. */
export function eventPush(event: EventBody, plan: Pick<PushMessage, "priority" | "tags">, say: Say): PushMessage {
  const none = say("anon-notify.direct.none");
  const lines = [
    say("anon-notify.direct.source", [pushField(event.source) || none]),
    say("anon-notify.direct.task", [pushField(event.task) || none]),
    say("anon-notify.direct.summary", [pushField(saidSummary(event, say), FIELD_BYTES.long) || none]),
    say("anon-notify.direct.event", [event.event_id]),
  ];
  const title = say("anon-notify.push.event-title", { status: statusLabel(event.status, say) });
  return { title, message: clipBytes(lines.join("\n"), MESSAGE_BYTES), ...plan };
}

/** An approval request as a push: what will run (exactly, on one line), the rules, the time left, and how to answer: the two capability URLs as
 * buttons (absent without a public base URL), else the console page as a `view` action. Pure. */
export function approvalPush(
  record: ApprovalRecord,
  now: Date,
  voice: Voice,
  links: { answer?: { approve: string; deny: string }; console?: string },
): PushMessage {
  const { say } = voice;
  const code = record.code;
  const asks = record.source === "ask_approval";
  const shown = shownCommand(record, PUSH_COMMAND_CHARS);
  const lines = [
    say("request.head", { code, project: pushField(basename(record.cwd) || record.cwd) }),
    asks
      ? say("request.asks", { action: pushField(record.action) })
      : say("request.wants", { tool: pushField(record.tool), action: actionText(record, voice) }),
    `┃ ${clipBytes(shown.text, FIELD_BYTES.long)}`,
    say("request.rules", { rules: clipBytes(record.rules.map(oneLine).join(", "), FIELD_BYTES.short) }),
  ];
  if (asks && record.reason) lines.push(say("request.reason", { reason: pushField(record.reason) }));
  lines.push(say("request.deadline", { left: durationText(record.expires_at.getTime() - now.getTime(), voice.locale) }));
  lines.push(links.answer ? say("push.buttons") : say("push.elsewhere", { code }));
  const actions: PushAction[] = links.answer
    ? [
        { action: "http", label: say("push.approve"), url: links.answer.approve, method: "POST", clear: true },
        { action: "http", label: say("push.deny"), url: links.answer.deny, method: "POST", clear: true },
      ]
    : links.console
      ? [{ action: "view", label: say("push.console"), url: links.console }]
      : [];
  return {
    title: say("push.title", { code }),
    message: clipBytes(lines.join("\n"), MESSAGE_BYTES),
    priority: 5,
    tags: ["warning", "lock"],
    ...(actions.length > 0 ? { actions } : {}),
  };
}
