/** `details.said`: the extension's own words in a summary as a closed key and typed values, so a server
 * words the line in its own language; the agent's text is never a value, only the summary from an offset on. */
import { z } from "zod";
import type { EventStatus } from "./events.ts";
import { ProgressSeverity, ProgressStage } from "./progress.ts";
import { LIMITS, oneLine, words } from "./wire.ts";

/** Why a settled run counts as failed (lifecycle.ts decides it; `details.failure_reason`); `turn_limit`, `time_limit`: past the run's limits (`--anon-notify-limits`). */
export const FailureReason = z.enum(
  words("length error incomplete_tool_batch tool_error_in_final_batch non_terminating_tool_batch unexpected_stop_reason turn_limit time_limit"),
);
export type FailureReason = z.infer<typeof FailureReason>;

/** The kinds of blocking dialog Pi announces (`ui_prompt_start`). */
export const DialogKind = z.enum(["select", "confirm", "input", "editor", "custom"]);
export type DialogKind = z.infer<typeof DialogKind>;

/** The project's name as the extension put it in the line; present when the line names it. */
const Project = oneLine(LIMITS.sourceChars).optional();
/** Where the agent's own words begin in `summary`, in code points; absent when the line has none. */
const TailFrom = z.number().int().nonnegative().max(LIMITS.summaryChars).optional();
/** The provider's error text as Pi reported it: shown verbatim, never worded. */
export const SAID_ERROR_CHARS = 300;

export const Said = z.discriminatedUnion("key", [
  z.strictObject({ key: z.literal("run_completed"), params: z.strictObject({ project: Project, reply_from: TailFrom }) }),
  z.strictObject({
    key: z.literal("run_failed"),
    params: z.strictObject({ project: Project, reason: FailureReason, error: z.string().max(SAID_ERROR_CHARS).optional(), reply_from: TailFrom }),
  }),
  z.strictObject({
    key: z.literal("report"),
    params: z.strictObject({
      project: Project,
      stage: ProgressStage,
      severity: ProgressSeverity,
      // The agent's one sentence (report_progress's `summary`, ≤ 120 chars); its detail is the tail.
      text: oneLine(120).pipe(z.string().min(1)),
      detail_from: TailFrom,
    }),
  }),
  z.strictObject({ key: z.literal("run_started"), params: z.strictObject({ project: Project }) }),
  // Still running: whole minutes since the start and tool calls so far.
  z.strictObject({
    key: z.literal("run_progress"),
    params: z.strictObject({ project: Project, minutes: z.number().int().nonnegative(), tool_calls: z.number().int().nonnegative() }),
  }),
  // A tool failed: its name as Pi gave it, its error text the tail.
  z.strictObject({
    key: z.literal("tool_error"),
    params: z.strictObject({ project: Project, tool: oneLine(120).pipe(z.string().min(1)), detail_from: TailFrom }),
  }),
  // A dialog Pi waits on; its title is the other extension's words, shown as they came.
  z.strictObject({ key: z.literal("needs_you"), params: z.strictObject({ project: Project, kind: DialogKind, title: oneLine(200).optional() }) }),
]);
export type Said = z.infer<typeof Said>;

/** The status a report's stage goes with: never the run's completion or failure (the lifecycle's); a stage that needs a person is a warning. */
export const STAGE_STATUS: Record<ProgressStage, EventStatus> = {
  started: "started",
  progress: "progress",
  done: "progress",
  blocked: "warning",
  awaiting_approval: "warning",
  failed: "warning",
};

/** The only status each said line may come with (a report's: its stage's). */
const KEY_STATUS = {
  run_completed: "completed",
  run_failed: "failed",
  needs_you: "warning",
  run_started: "started",
  run_progress: "progress",
  tool_error: "tool_error",
} as const;

/** A said line a reader may word: checked, with `agent` the agent's own words cut out of the summary (the reply, or the report's detail; "" if none). */
export type ReadSaid = { said: Said; agent: string };

/** `details.said` if a reader may word it: the extension's own notice (`pi:` id), a known key with valid values, the matching status and an offset inside
 * the summary; else undefined, and the summary is shown as it came. */
export function readSaid(event: { event_id: string; status: EventStatus; summary: string; details: Record<string, unknown> | null }): ReadSaid | undefined {
  if (!event.event_id.startsWith("pi:") || !event.details || !Object.hasOwn(event.details, "said")) return undefined;
  const parsed = Said.safeParse(event.details.said);
  if (!parsed.success) return undefined;
  const said = parsed.data;
  if ((said.key === "report" ? STAGE_STATUS[said.params.stage] : KEY_STATUS[said.key]) !== event.status) return undefined;
  const offsets = said.params as { reply_from?: number; detail_from?: number };
  const from = offsets.reply_from ?? offsets.detail_from;
  const chars = Array.from(event.summary);
  if (from !== undefined && from > chars.length) return undefined;
  return { said, agent: from === undefined ? "" : chars.slice(from).join("") };
}
