/** The sink's own reading of a settled run: the chat classifier decides, but a user interrupt and a run
 * with no reply are reported here. */
import type { RunOutcome } from "../../lifecycle.ts";
import type { RoundEnd } from "./hold-rules.ts";
import { formatSinkError } from "./payload-rules.ts";

export function roundEndOf(outcome: RunOutcome, answer: { text: string; at: number | undefined } | undefined): RoundEnd {
  switch (outcome.kind) {
    case "completed":
      return answer
        ? { kind: "completed", had_response: true, answer: answer.text, answered_at: isoTime(answer.at) }
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

function isoTime(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
}
