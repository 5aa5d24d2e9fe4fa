/** `run.completed` is held at every settle and released once, at the last settle of a unit of chained runs; failure and cancellation end the unit at
 * once. A user interrupt and a run with no reply are read here; the chat classifier decides the rest. */
import type { RunOutcome } from "../../lifecycle.ts";
import { formatSinkError } from "./payload-rules.ts";

export type RoundEnd =
  | { kind: "completed"; had_response: boolean; answer?: string; answered_at?: string }
  | { kind: "failed"; error: string }
  | { kind: "cancelled" };

/** One settled round, or several merged. */
export type Round = RoundEnd & { duration_ms?: number; agent_name?: string };
export type CompletedRound = Extract<Round, { kind: "completed" }>;

export type HoldDecision = { held: CompletedRound | null; emit: Round | null };

/** Merges an earlier part of the unit into a later round: durations summed (unknown if either is), the first agent name, `had_response` if any round
 * had one, the last answer with its own `answered_at`; the later round's kind wins. */
export function mergeRounds(earlier: CompletedRound | null, later: Round): Round {
  if (earlier === null) return later;
  const duration_ms = earlier.duration_ms === undefined || later.duration_ms === undefined ? undefined : earlier.duration_ms + later.duration_ms;
  const agent_name = earlier.agent_name || later.agent_name || undefined;
  if (later.kind !== "completed") return { ...later, duration_ms, agent_name };
  const lastAnswer = later.answer !== undefined ? later : earlier;
  return {
    kind: "completed",
    duration_ms,
    agent_name,
    had_response: earlier.had_response || later.had_response,
    answer: lastAnswer.answer,
    answered_at: lastAnswer.answered_at,
  };
}

/** At `agent_settled`: completion is held until it is known whether more work follows. */
export function onRoundSettled(held: CompletedRound | null, round: Round): HoldDecision {
  const merged = mergeRounds(held, round);
  return merged.kind === "completed" ? { held: merged, emit: null } : { held: null, emit: merged };
}

/** Once the settle has quieted down: if another round already started, the completion stays held; otherwise it is released now, so every hold ends
 * in exactly one release, failure or cancellation. */
export function onSettleQuiet(held: CompletedRound | null, nextRoundStarted: boolean): HoldDecision {
  if (held === null || nextRoundStarted) return { held, emit: null };
  return { held: null, emit: held };
}

export function roundEndOf(outcome: RunOutcome, answer: { text: string; at: number | undefined } | undefined): RoundEnd {
  switch (outcome.kind) {
    case "completed":
      return answer
        ? { kind: "completed", had_response: true, answer: answer.text, answered_at: answer.at === undefined ? undefined : new Date(answer.at).toISOString() }
        : { kind: "completed", had_response: false };
    case "silent":
      return { kind: "failed", error: formatSinkError("RunError", "the run ended without a reply") };
    case "interrupted":
      return { kind: "cancelled" };
    case "failed":
      return { kind: "failed", error: failureText(outcome) };
  }
}

function failureText(outcome: Extract<RunOutcome, { kind: "failed" }>): string {
  switch (outcome.reason) {
    case "error":
      return formatSinkError("ModelError", outcome.errorMessage ?? undefined);
    case "length":
      return formatSinkError("LengthError", "the reply was cut off at the output token limit");
    case "incomplete_tool_batch":
    case "tool_error_in_final_batch":
    case "non_terminating_tool_batch":
      return formatSinkError("ToolError", `the run ended after its tool calls without a reply (${outcome.reason})`);
    case "turn_limit":
    case "time_limit":
      return formatSinkError("LimitError", `the run was stopped at its ${outcome.reason === "turn_limit" ? "turn" : "time"} limit`);
    case "unexpected_stop_reason":
      return formatSinkError("RunError", `unexpected stop reason ${outcome.stopReason}`);
  }
}
