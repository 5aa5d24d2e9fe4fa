import { test } from "node:test";
import assert from "node:assert/strict";
import type { RunOutcome } from "../../lifecycle.ts";
import { type RoundEnd, roundEndOf } from "../../extension/sink/hold-rules.ts";

const failed = (reason: Extract<RunOutcome, { kind: "failed" }>["reason"], errorMessage: string | null = null, stopReason = "error"): RunOutcome => ({
  kind: "failed",
  stopReason,
  reason,
  errorMessage,
});

test("a settled run becomes the app's completed, failed or cancelled, with the error kind it reads from the prefix", () => {
  const answer: { text: string; at: number | undefined } = { text: "done", at: Date.parse("2026-11-30T03:00:00.000Z") };
  const rows: [string, RunOutcome, typeof answer | undefined, RoundEnd][] = [
    [
      "completed with a reply",
      { kind: "completed", stopReason: "stop" },
      answer,
      { kind: "completed", had_response: true, answer: "done", answered_at: "2026-11-30T03:00:00.000Z" },
    ],
    [
      "completed with a reply of unknown time",
      { kind: "completed", stopReason: "stop" },
      { text: "ok", at: undefined },
      { kind: "completed", had_response: true, answer: "ok", answered_at: undefined },
    ],
    ["completed without a reply", { kind: "completed", stopReason: "stop" }, undefined, { kind: "completed", had_response: false }],
    ["silent", { kind: "silent" }, answer, { kind: "failed", error: "RunError: the run ended without a reply" }],
    ["interrupted by the user", { kind: "interrupted" }, answer, { kind: "cancelled" }],
    ["model error", failed("error", "invalid api key"), undefined, { kind: "failed", error: "ModelError: invalid api key" }],
    ["model error without a message", failed("error"), undefined, { kind: "failed", error: "ModelError: (no message)" }],
    ["length", failed("length", null, "length"), undefined, { kind: "failed", error: "LengthError: the reply was cut off at the output token limit" }],
    [
      "tool batch",
      failed("tool_error_in_final_batch", null, "toolUse"),
      undefined,
      { kind: "failed", error: "ToolError: the run ended after its tool calls without a reply (tool_error_in_final_batch)" },
    ],
    ["odd stop reason", failed("unexpected_stop_reason", null, "pause"), undefined, { kind: "failed", error: "RunError: unexpected stop reason pause" }],
  ];
  for (const [name, outcome, reply, expected] of rows) assert.deepEqual(roundEndOf(outcome, reply), expected, name);
});
