/** The opt-in `report_progress` tool: the model fills a structure, code validates, renders and rate-limits
 * it, and no parameter can name a recipient; a refused call is audited on the server. */
import { createHash } from "node:crypto";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { Type, type Static } from "typebox";
import { Value } from "typebox/value";
import type { RunRecorder } from "../run-recorder.ts";
import type { CurrentSession } from "../session/current.ts";
import type { Report } from "../session/report.ts";
import { noticeOf, saidLine, type NoticeContext } from "./notice-rules.ts";
import type { EventBody } from "../../protocol/events.ts";
import { STAGE_STATUS } from "../../protocol/said.ts";
import { ProgressSeverity, ProgressStage, ToolCallRecorded, type ToolCallRecord } from "../../protocol/progress.ts";
import { errorText } from "../../common/errors.ts";
import { offeredTool } from "../pi-handlers.ts";
import type { Messages } from "../texts/messages.ts";

export const PROGRESS_TOOL_NAME = "report_progress";
export const REPORTS_PER_MINUTE = 6;
const MINUTE_MS = 60_000;
const RECORD_TIMEOUT_MS = 5_000;

/** The tool's parameters: a structure, never free text to a chosen recipient; described to the model in the session's language. */
export function progressParams(words?: Messages["tools"]["progress"]["params"]) {
  return Type.Object(
    {
      stage: Type.Enum([...ProgressStage.options], { description: words?.stage }),
      summary: Type.String({ minLength: 1, maxLength: 120, description: words?.summary }),
      detail: Type.Optional(Type.String({ maxLength: 1000, description: words?.detail })),
      artifact: Type.Optional(Type.String({ maxLength: 2048, pattern: "^https?://[^\\s\\x00-\\x1f\\x7f]+$", description: words?.artifact })),
      severity: Type.Optional(Type.Enum([...ProgressSeverity.options], { description: words?.severity })),
    },
    { additionalProperties: false },
  );
}
/** The shape the code checks a call against (descriptions do not change what passes). */
export const ProgressParams = progressParams();
export type ProgressArgs = Static<typeof ProgressParams>;

/** When each sent report of the run went out (only the last minute matters), and the last stage. */
export type ReportState = { sentAt: readonly number[]; lastStage: ProgressStage | null };
export const NO_REPORTS: ReportState = { sentAt: [], lastStage: null };

type ReportDecision =
  | { kind: "send"; args: ProgressArgs; state: ReportState }
  | { kind: "refuse"; code: "subagent" | "inactive" | "invalid" | "rate_limited" | "duplicate"; reason: string };

/** `text`: the refusals' words in the session's language (the model reads them); `unavailable`: why nothing can be sent from this session at all. */
export type ReportFacts = { nowMs: number; text: Messages["notice"]["refusal"]; unavailable?: "subagent" | "inactive" };

/** Whether a call goes out, and the run's state after it. */
export function decideReport(state: ReportState, input: unknown, facts: ReportFacts): ReportDecision {
  const t = facts.text;
  if (facts.unavailable) return { kind: "refuse", code: facts.unavailable, reason: t[facts.unavailable] };
  const problem = argumentProblem(input, t);
  if (problem) return { kind: "refuse", code: "invalid", reason: t.invalid(problem) };
  const args = input as ProgressArgs;
  const recent = state.sentAt.filter((at) => facts.nowMs - at < MINUTE_MS);
  if (recent.length >= REPORTS_PER_MINUTE) {
    const waitSeconds = Math.ceil((recent[0]! + MINUTE_MS - facts.nowMs) / 1000);
    return { kind: "refuse", code: "rate_limited", reason: t.rateLimited(REPORTS_PER_MINUTE, waitSeconds) };
  }
  if (args.stage === "progress" && state.lastStage === "progress") return { kind: "refuse", code: "duplicate", reason: t.duplicate };
  return { kind: "send", args, state: { sentAt: [...recent, facts.nowMs], lastStage: args.stage } };
}

function argumentProblem(input: unknown, t: ReportFacts["text"]): string | undefined {
  if (!Value.Check(ProgressParams, input)) {
    const first = Value.Errors(ProgressParams, input)[0];
    return first ? `${first.instancePath || t.arguments} ${first.message}` : t.shape;
  }
  const { artifact } = input as ProgressArgs;
  if (artifact !== undefined && !URL.canParse(artifact)) return t.artifact;
  return undefined;
}

const callHash = (toolCallId: string) => createHash("sha256").update(toolCallId).digest("hex").slice(0, 24);

/** One id per tool call: the outbox may resend it, the server answers a repeat as a duplicate. */
export const progressEventId = (sessionId: string, toolCallId: string) => `pi:${sessionId}:report:${callHash(toolCallId)}`;

/** The notice a sent report becomes, rendered by code from the structure. */
export function progressEvent(args: ProgressArgs, toolCallId: string, task: string, context: NoticeContext): EventBody {
  const severity = args.severity ?? "info";
  const t = context.text;
  const line = t.report(t.severity[severity], t.stage[args.stage], args.summary, args.detail ?? null);
  // What the report says, for a server that words it itself; the model's words are values, never the key.
  const tail = { param: "detail_from", text: args.detail ?? "" } as const;
  const { summary, said } = saidLine(line, { key: "report", params: { stage: args.stage, severity, text: args.summary } }, context, tail);
  return noticeOf(context, {
    eventId: progressEventId(context.sessionId, toolCallId),
    task,
    status: STAGE_STATUS[args.stage],
    summary,
    details: {
      report: { stage: args.stage, severity, detail: args.detail ?? null, artifact: args.artifact ?? null },
      tool: PROGRESS_TOOL_NAME,
      ...(said ? { said } : {}),
    },
    url: args.artifact ?? null,
  });
}

export function refusedCallRecord(
  input: unknown,
  toolCallId: string,
  reason: string,
  context: Pick<NoticeContext, "sessionId" | "runtimeId" | "now">,
): ToolCallRecord {
  const asObject = typeof input === "object" && input !== null && !Array.isArray(input) ? (input as Record<string, unknown>) : { value: input };
  const serialised = JSON.stringify(asObject);
  return {
    session_id: context.sessionId,
    runtime_id: context.runtimeId,
    tool: PROGRESS_TOOL_NAME,
    tool_call_id: `call-${callHash(toolCallId)}`,
    decision: "refused",
    reason: reason.slice(0, 200),
    event_id: null,
    // The record must fit the wire's 4 KiB: an oversized input is kept as its beginning.
    input: Buffer.byteLength(serialised) <= 3_500 ? asObject : { truncated: serialised.slice(0, 1_000) },
    created_at: context.now.toISOString(),
  };
}

/** `details` is for the session file and renderers; the model reads only the text. */
type Outcome = { content: { type: "text"; text: string }[]; details: { sent: boolean; reason?: string; event_id?: string } };

/** Registers the Pi handlers; the session service's `start` offers the tool (registered once per runtime, then activated), `stop` withdraws it. */
export function installProgressTool(pi: ExtensionAPI, current: CurrentSession, recorder: RunRecorder, report: Report) {
  const text = current.text;
  const recordRefusal = (input: unknown, toolCallId: string, reason: string) => {
    const s = current.state;
    if (!s?.delivery) return;
    const body = refusedCallRecord(input, toolCallId, reason, { sessionId: s.sessionId, runtimeId: current.runtimeId, now: new Date() });
    // Not awaited: the model's turn never waits on the network.
    const recorded = s.delivery.client.request("POST", "audit/tool-calls", { body, schema: ToolCallRecorded, timeoutMs: RECORD_TIMEOUT_MS });
    recorded.catch((error: unknown) => report(text().notice.reportNotAudited(errorText(error))));
  };
  let reports: ReportState = NO_REPORTS;
  // "Per run": the count and the last stage start again with each settled unit of work.
  pi.on("agent_settled", () => {
    reports = NO_REPORTS;
  });

  // Pi checks the arguments against the schema before our code runs; a call it refuses is still a
  // call, so it is recorded from its start and end events.
  const unchecked = new Map<string, unknown>();
  pi.on("tool_execution_start", (event) => {
    if (event.toolName === PROGRESS_TOOL_NAME) unchecked.set(event.toolCallId, event.args);
  });
  pi.on("tool_execution_end", (event) => {
    if (event.toolName !== PROGRESS_TOOL_NAME || !unchecked.has(event.toolCallId)) return;
    const input = unchecked.get(event.toolCallId);
    unchecked.delete(event.toolCallId);
    const why = (event.result as { content?: { type: string; text?: string }[] } | undefined)?.content?.find((block) => block.type === "text")?.text ?? "";
    recordRefusal(input, event.toolCallId, text().notice.refusal.invalid(why));
  });

  const execute = async (toolCallId: string, input: unknown): Promise<Outcome> => {
    unchecked.delete(toolCallId);
    const to = current.target();
    const t = text();
    const decision = decideReport(reports, input, {
      nowMs: Date.now(),
      text: t.notice.refusal,
      ...(to ? {} : { unavailable: current.state?.subagent ? "subagent" : "inactive" }),
    });
    if (decision.kind === "refuse" || !to) {
      const { code, reason } = decision.kind === "refuse" ? decision : { code: "inactive", reason: t.notice.refusal.inactive };
      recordRefusal(input, toolCallId, reason);
      return { content: [{ type: "text", text: t.tools.progress.notSent(reason) }], details: { sent: false, reason: code } };
    }
    reports = decision.state;
    const event = progressEvent(decision.args, toolCallId, recorder.current()?.facts.task ?? "", to.context());
    // A report is kept until delivered, like a final notice: the outbox and the event id make it exactly-once.
    to.notifier.send(event, { final: true });
    return { content: [{ type: "text", text: t.tools.progress.submitted }], details: { sent: true, event_id: event.event_id } };
  };

  // Registering after the session is bound refreshes the tool list and activates the new tool;
  // described in the session's language, registered again when a later session speaks another.
  const progressTool = offeredTool(pi, PROGRESS_TOOL_NAME, () => {
    const t = text().tools.progress;
    pi.registerTool({
      name: PROGRESS_TOOL_NAME,
      label: t.label,
      description: t.description(REPORTS_PER_MINUTE),
      promptSnippet: t.snippet,
      parameters: progressParams(t.params),
      execute: (toolCallId, params) => execute(toolCallId, params),
    });
  });

  return {
    start() {
      if (current.state?.config?.progressTool.enabled && current.target()) progressTool.offer(text().language);
    },
    async stop() {
      progressTool.withdraw();
    },
  };
}
