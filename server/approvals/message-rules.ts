/** The texts an approval sends. Agent-written parts are redacted and shown on one line, controls visible,
 * and every line starts with the server's own words, so the agent cannot forge a line (`批准：anon.approve …`). */
import { basename } from "node:path";
import { commandPreview, visibleControls } from "../../common/command-text.ts";
import { redactSecrets } from "../../common/redact.ts";
import { actionLabel } from "../../common/action-label.ts";
import { ruleSites } from "../../common/rule-sites.ts";
import type { Approval, Grant } from "../../protocol/approvals.ts";
import type { EventBody } from "../../protocol/events.ts";
import type { Say } from "../locales/load.ts";
import { isOpen, type ApprovalRecord } from "./decisions.ts";

/** The approval texts of one `Say` (the instance's or a chat session's): `say` looks up `anon-notify.approval.<key>`; `locale` formats numbers. */
export const voiceOf = (say: Say) => ({
  say: (key: string, params?: Record<string, unknown> | unknown[]) => say(`anon-notify.approval.${key}`, params),
  locale: say("anon-notify.locale"),
});
export type Voice = ReturnType<typeof voiceOf>;

/** How much of the command the chat request shows before cutting to head and tail. */
export const REQUEST_COMMAND_CHARS = 1000;
/** How much of it the persona's mention and a listing line show. */
export const MENTION_COMMAND_CHARS = 300;
export const WHOLE_COMMAND_MESSAGE_CHARS = 1500;
/** The mark in front of each line of agent-written command text. */
const BAR = "┃ ";

export const oneLine = (text: string) => visibleControls(redactSecrets(text));

/** A time span as the locale writes it, rounded down (never more time than there is), at least 1 s. */
export function durationText(ms: number, locale: string): string {
  const unit = (name: "second" | "minute" | "hour", count: number) =>
    new Intl.NumberFormat(locale, { style: "unit", unit: name, unitDisplay: "long" }).format(count);
  const seconds = Math.max(1, Math.floor(ms / 1000));
  if (seconds < 90) return unit("second", seconds);
  const minutes = Math.floor(seconds / 60);
  if (minutes < 90) return unit("minute", minutes);
  const hours = Math.floor(minutes / 60);
  return minutes % 60 === 0 ? unit("hour", hours) : `${unit("hour", hours)} ${unit("minute", minutes % 60)}`;
}

export const shownCommand = (record: Pick<ApprovalRecord, "command">, maxChars: number) => commandPreview(redactSecrets(record.command), maxChars);

/** The action in the voice's language: the server's words for a code it knows, a user rule's label as theirs, the agent's
 * words marked as such (never passed off as the server's); an unknown code gets generic words. */
export function actionText(approval: Pick<Approval, "source" | "action" | "action_code"> & { rules?: readonly string[] }, voice: Voice): string {
  const label = actionLabel(approval);
  switch (label.kind) {
    case "words":
      return label.words;
    case "worded":
      return voice.say(`action.${label.code}`);
    case "rule":
      return voice.say("action.rule", { label: oneLine(label.label) });
    case "model":
      return oneLine(label.text);
    case "agent":
      return voice.say("action.agent", { label: oneLine(label.text) });
    case "unknown":
      return voice.say("action.unknown");
  }
}

const project = (record: Pick<ApprovalRecord, "cwd">) => oneLine(basename(record.cwd) || record.cwd);

/** A word as a shell would read it back: plain words as they are, anything else in single quotes. */
const shellWord = (word: string) => (/^[A-Za-z0-9_./=:@%+,-]+$/.test(word) ? word : `'${word.replaceAll("'", `'\\''`)}'`);

/** Simple commands as words, one line (`rm -rf build; npm test`), controls visible. */
export const argvText = (argv: readonly (readonly string[])[]) => oneLine(argv.map((command) => command.map(shellWord).join(" ")).join("; "));

export function coversText(grant: Pick<Grant, "argv" | "prefix">, voice: Voice): string {
  return voice.say(grant.prefix ? "covers.prefix" : "covers.exact", { command: argvText(grant.argv ?? []) });
}

/** The confirmation of an approval granted: which call, where, for how long, and how to revoke. */
export function grantedText(approval: Approval, grant: Grant, voice: Voice): string {
  return voice.say("granted", {
    code: approval.code,
    action: actionText(approval, voice),
    grant: grant.grant_id,
    project: project(grant),
    covers: coversText(grant, voice),
    left: durationText(Date.parse(grant.expires_at) - Date.parse(grant.created_at), voice.locale),
  });
}

/** The request the owner answers: code, what will run (exactly), which rules, the real time left, how to answer. */
export function requestText(record: ApprovalRecord, now: Date, voice: Voice): string {
  const { say } = voice;
  const code = record.code;
  const asks = record.source === "ask_approval";
  const shown = shownCommand(record, REQUEST_COMMAND_CHARS);
  const lines = [
    say("request.head", { code, project: project(record) }),
    asks ? say("request.asks", { action: oneLine(record.action) }) : say("request.wants", { tool: oneLine(record.tool), action: actionText(record, voice) }),
    BAR + shown.text,
  ];
  if (shown.hiddenChars > 0) lines.push(say("request.hidden", { count: shown.hiddenChars, code }));
  if (record.command_hidden_chars > 0) lines.push(say("request.client-cut", { count: record.command_hidden_chars }));
  lines.push(say("request.rules", { rules: rulesText(record, voice) }));
  // A policy request's reason is the extension's own wording of the rules, in Pi's language: the rules say it here.
  if (asks && record.reason) lines.push(say("request.reason", { reason: oneLine(record.reason) }));
  lines.push(
    say("request.deadline", { left: durationText(record.expires_at.getTime() - now.getTime(), voice.locale) }),
    say("request.approve", { code }),
    say("request.deny", { code }),
  );
  return lines.join("\n");
}

/** Every rule, each with where it matched: `rm-rf (line 1, col 10); sudo (line 2)`, or what it matched when that is not in the command as written. */
export function rulesText(record: Pick<ApprovalRecord, "rules" | "matched" | "command">, voice: Voice): string {
  return ruleSites(record.rules, record.matched, redactSecrets(record.command))
    .map(({ rule, line, col, at }) => {
      if (line !== undefined) return voice.say(col === 1 ? "request.site.line" : "request.site.place", { rule: oneLine(rule), line, col });
      return at === undefined ? oneLine(rule) : voice.say("request.site.text", { rule: oneLine(rule), at: oneLine(at) });
    })
    .join("; ");
}

/** The one message that closes a request, so no stale request is left looking open. */
export function closingText(record: ApprovalRecord, voice: Voice): string {
  const { say } = voice;
  const { state, grant_id: grant, grant_use: use } = record;
  const why = record.outcome_reason ?? record.decision_reason;
  const params = {
    via: record.via && WORDED_VIAS.has(record.via) ? say(`via.${record.via}`) : "",
    reason: why ? say("with-reason", [oneLine(why)]) : "",
    terminal: record.via === "terminal" ? say("closing.terminal-first") : "",
  };
  // "3rd use" / "第 3 次使用": the locale's ordinal category picks the words.
  const ordinal = (n: number) => say(`closing.use.${new Intl.PluralRules(voice.locale, { type: "ordinal" }).select(n)}`, { n });
  const outcome =
    state === "approved" && grant && use
      ? say("closing.approved-grant", { grant, use: ordinal(use) })
      : state === "rejected" && record.via === "aborted"
        ? say("closing.aborted")
        : isOpen(state)
          ? state
          : say(`closing.${state}`, params);
  return (say("closing.head", { code: record.code, action: actionText(record, voice) }) + outcome).trim();
}

/** The ways of closing an approval that have words of their own (`via.<via>`). */
export const WORDED_VIAS: ReadonlySet<string> = new Set(["chat", "operator", "console", "ntfy", "terminal", "policy"]);

/** The persona hears of the request too, but only the owner can answer it. */
export function mentionEvent(record: ApprovalRecord, now: Date, voice: Voice): EventBody {
  const command = shownCommand(record, MENTION_COMMAND_CHARS).text;
  return {
    event_id: `approval:${record.approval_id}:request`,
    session_id: record.session_id,
    runtime_id: record.runtime_id,
    source: `Pi Agent · ${project(record) || "project"}`.slice(0, 120),
    task: "",
    status: "warning",
    summary: voice.say("mention", { code: record.code, action: actionText(record, voice), command }).slice(0, 1200),
    details: { approval: { approval_id: record.approval_id, code: record.code, tool: record.tool, state: record.state } },
    url: null,
    context_usage: null,
    created_at: now.toISOString(),
    delivery: "anon",
  };
}

/** The command redacted, one entry per line it has, each with its controls visible and its line break shown as `⏎`. */
export function commandLines(command: string): string[] {
  const lines = redactSecrets(command).split("\n");
  return lines.map((line, i) => visibleControls(line) + (i < lines.length - 1 ? "⏎" : ""));
}

/** The whole stored command for `anon.approval <code>`: each line behind the bar, controls visible, packed into messages of
 * at most `maxChars` (a longer line split, its pieces marked as continuing), each headed with its place in the series. */
export function wholeCommandTexts(
  record: Pick<ApprovalRecord, "code" | "command" | "command_hidden_chars" | "rules" | "matched">,
  voice: Voice,
  maxChars = WHOLE_COMMAND_MESSAGE_CHARS,
): string[] {
  const rendered = commandLines(record.command).flatMap((line) => {
    const chars = Array.from(line);
    const room = maxChars - BAR.length - 1;
    const pieces: string[] = [];
    for (let at = 0; at < chars.length || pieces.length === 0; at += room) pieces.push(chars.slice(at, at + room).join(""));
    return pieces.map((piece, j) => (j === 0 ? BAR : "┆ ") + piece);
  });
  const bodies: string[][] = [[]];
  let size = 0;
  for (const line of rendered) {
    if (size + line.length + 1 > maxChars && bodies.at(-1)!.length > 0) {
      bodies.push([]);
      size = 0;
    }
    bodies.at(-1)!.push(line);
    size += line.length + 1;
  }
  const cut = record.command_hidden_chars > 0 ? [voice.say("request.client-cut", { count: record.command_hidden_chars })] : [];
  const tail = [...cut, voice.say("request.rules", { rules: rulesText(record, voice) })];
  return bodies.map((body, i) =>
    [voice.say("whole.head", { code: record.code, part: i + 1, parts: bodies.length }), ...body, ...(i === bodies.length - 1 ? tail : [])].join("\n"),
  );
}
