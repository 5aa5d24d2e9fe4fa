/** The event body sent to the server: ids, truncation to the wire limits, the summary and the
 * `context_usage` snapshot, from what the caller read from Pi. */
import { ContextUsage, type DeliveryRoute, type EventBody, type EventStatus } from "../../protocol/events.ts";
import { SAID_ERROR_CHARS, Said } from "../../protocol/said.ts";
import { LIMITS } from "../../protocol/wire.ts";
import type { RunFacts, RunOutcome } from "../../lifecycle.ts";
import type { SendRequest } from "../../protocol/state-bus.ts";
import type { zhNotice } from "../texts/delivery.ts";
import type { Config } from "../config/schema-rules.ts";

export type NoticeTexts = typeof zhNotice;

/** Pi's `ctx.getContextUsage()` result, as far as it is read here. */
export type PiContextUsage = { tokens: number | null; contextWindow: number; percent: number | null };

/** After a compaction both unknowns stay null; no model, a throwing reader or an impossible number makes the whole field null (never a false 0 %). */
export function sampleContextUsage(read: () => PiContextUsage | undefined): ContextUsage | null {
  let usage: PiContextUsage | undefined;
  try {
    usage = read();
  } catch {
    return null;
  }
  if (!usage) return null;
  const parsed = ContextUsage.safeParse({
    used_tokens: usage.tokens,
    context_window: usage.contextWindow,
    // Two decimals: Pi's float arithmetic (1.4425000000000001) is noise to every reader.
    percent: usage.percent === null ? null : Math.round(usage.percent * 100) / 100,
  });
  return parsed.success ? parsed.data : null;
}

/** Cuts to `max` code points (never half a surrogate pair), marking the cut with "…". */
export function truncate(text: string, max: number): string {
  const chars = Array.from(text);
  if (chars.length <= max) return text;
  return `${chars.slice(0, Math.max(0, max - 1)).join("")}…`;
}

/** A final notice's id comes from the run's last assistant entry, so a resend after a crash or reload carries the same id and the server deduplicates it. */
export function finalEventId(sessionId: string, assistantEntryId: string, status: "completed" | "failed"): string {
  return `pi:${sessionId}:${assistantEntryId}:${status}`;
}

/** Notices not tied to a persisted entry (non-final ones, a final whose reply was not found): the runtime id keeps them apart across reloads. */
const transientEventId = ({ sessionId, runtimeId }: NoticeContext, sequence: number, status: EventStatus) =>
  `pi:${sessionId}:${runtimeId}:${sequence}:${status}`;

type ContentOptions = Config["content"];

/** A line the extension wrote, and what it says in `details.said` (undefined when it cannot point at the agent's words). */
export type SaidLine = { summary: string; said: Said | undefined };

/** What a line says before the project and the agent's words are placed. */
type SaidDraft = {
  [K in Said["key"]]: { key: K; params: Omit<Extract<Said, { key: K }>["params"], "project" | "reply_from" | "detail_from"> };
}[Said["key"]];

/** The summary a line becomes and its said form (project added, the agent's words located by offset, checked against the schema), or no said. */
export function saidLine(
  line: string,
  draft: SaidDraft,
  context: Pick<NoticeContext, "content" | "project" | "text">,
  tail?: { param: "reply_from" | "detail_from"; text: string },
): SaidLine {
  const summary = context.content.includeProject ? context.text.inProject(context.project, line) : line;
  // Where the agent's words (at the end of the line) begin, in code points.
  const from = tail?.text && summary.endsWith(tail.text) ? Array.from(summary).length - Array.from(tail.text).length : undefined;
  if (tail?.text && from === undefined) return { summary, said: undefined };
  const said = Said.safeParse({
    key: draft.key,
    params: {
      ...(context.content.includeProject ? { project: context.project } : {}),
      ...draft.params,
      ...(tail && from !== undefined ? { [tail.param]: from } : {}),
    },
  });
  return { summary, said: said.success ? said.data : undefined };
}

/** A settled run's summary: the final reply, or why it failed, in the session's language. */
export function runSummary(
  outcome: Extract<RunOutcome, { kind: "completed" | "failed" }>,
  facts: RunFacts,
  content: ContentOptions,
  project: string,
  t: NoticeTexts,
): SaidLine {
  const reply = content.includeFinalReply ? (facts.lastAssistant?.text.trim() ?? "") : "";
  const tail = { param: "reply_from", text: reply } as const;
  const context = { content, project, text: t };
  if (outcome.kind === "completed") return saidLine(reply || t.completed, { key: "run_completed", params: {} }, context, tail);
  const why = t.failed(t.failure[outcome.reason], outcome.errorMessage || null);
  const error = outcome.errorMessage ? { error: truncate(outcome.errorMessage, SAID_ERROR_CHARS) } : {};
  return saidLine(reply ? `${why}\n${reply}` : why, { key: "run_failed", params: { reason: outcome.reason, ...error } }, context, tail);
}

export interface NoticeParts {
  eventId: string;
  sessionId: string;
  runtimeId: string;
  source: string;
  task: string;
  status: EventStatus;
  summary: string;
  details: Record<string, unknown> | null;
  url?: string | null;
  contextUsage: ContextUsage | null;
  createdAt: Date;
  delivery?: DeliveryRoute;
}

/** The wire body, cut to the limits. Not parsed here: the notifier validates every event once, at its boundary. */
export function buildEvent(parts: NoticeParts, content: Pick<ContentOptions, "maxTaskChars" | "maxSummaryChars">): EventBody {
  return {
    event_id: parts.eventId,
    session_id: parts.sessionId,
    runtime_id: parts.runtimeId,
    source: truncate(parts.source, LIMITS.sourceChars),
    task: truncate(parts.task, Math.min(content.maxTaskChars, LIMITS.taskChars)),
    status: parts.status,
    summary: truncate(parts.summary, Math.min(content.maxSummaryChars, LIMITS.summaryChars)),
    details: parts.details,
    url: parts.url ?? null,
    context_usage: parts.contextUsage,
    created_at: parts.createdAt.toISOString(),
    delivery: parts.delivery ?? "anon",
  };
}

export interface NoticeContext {
  sessionId: string;
  runtimeId: string;
  source: string;
  project: string;
  content: ContentOptions;
  contextUsage: ContextUsage | null;
  now: Date;
  text: NoticeTexts;
}

type OwnParts = Omit<NoticeParts, "sessionId" | "runtimeId" | "source" | "contextUsage" | "createdAt"> & { source?: string | undefined };

/** A notice of the context's session and runtime, at its time, from its source unless `parts` name one. */
export function noticeOf(context: NoticeContext, parts: OwnParts): EventBody {
  const { sessionId, runtimeId, contextUsage, now: createdAt } = context;
  return buildEvent({ sessionId, runtimeId, contextUsage, createdAt, ...parts, source: parts.source ?? context.source }, context.content);
}

/** A notice about the run: its task, the line as summary, the line's said form last in the details. */
const runNotice = (context: NoticeContext, eventId: string, status: EventStatus, line: SaidLine, facts: RunFacts, details: Record<string, unknown>) =>
  noticeOf(context, { eventId, task: facts.task, status, summary: line.summary, details: { ...details, ...(line.said ? { said: line.said } : {}) } });

/** A settled run's final notice, undefined when not reported; a reply not found in the session still reports it, by an id unique in this runtime. */
export function finalNotice(outcome: RunOutcome, facts: RunFacts, context: NoticeContext, sequence: number): EventBody | undefined {
  if (outcome.kind !== "completed" && outcome.kind !== "failed") return undefined;
  const entryId = facts.lastAssistant?.entryId;
  const line = runSummary(outcome, facts, context.content, context.project, context.text);
  const eventId = entryId ? finalEventId(context.sessionId, entryId, outcome.kind) : transientEventId(context, sequence, outcome.kind);
  return runNotice(context, eventId, outcome.kind, line, facts, {
    stop_reason: outcome.stopReason,
    ...(outcome.kind === "failed" ? { failure_reason: outcome.reason } : {}),
    // So the owner's view knows how long it took without a `started` notice (off by default).
    ...(facts.startKnown ? { run_started_at: new Date(facts.startedAt).toISOString() } : {}),
  });
}

/** A started, progress or tool-error notice: never resent, so its id only has to be unique. */
export function transientNotice(
  status: "started" | "progress" | "tool_error",
  line: SaidLine,
  facts: RunFacts,
  sequence: number,
  context: NoticeContext,
): EventBody {
  return runNotice(context, transientEventId(context, sequence, status), status, line, facts, { tool_calls: facts.toolCalls, tool_errors: facts.toolErrors });
}

/** Another extension's `anon-notify:send`, already validated against SendRequest; its `eventId` scoped to the session. Its details lose `said`: only
 * this extension's own code says what its words mean, so a carried notice cannot be reworded as a run's outcome. */
export function externalNotice(request: SendRequest, generatedId: string, context: NoticeContext): EventBody {
  const { said: _dropped, ...details } = request.details ?? {};
  return noticeOf(context, {
    eventId: `ext:${context.sessionId}:${request.eventId ?? generatedId}`,
    source: request.source,
    task: request.task ?? "",
    status: request.status,
    summary: request.summary,
    details: request.details ? details : null,
    url: request.url ?? null,
    ...(request.delivery ? { delivery: request.delivery } : {}),
  });
}
