import { test } from "node:test";
import assert from "node:assert/strict";
import {
  classifyRun,
  progressDue,
  startRun,
  toolErrorDue,
  withAbort,
  withAssistant,
  withBeforeSettle,
  withCompaction,
  withLowLevelStart,
  withTask,
  withToolEnd,
  type RunFacts,
  type RunOutcome,
} from "../../lifecycle.ts";
import { persistedEntryId, taskInProgress, type BranchEntry } from "../../extension/run-recorder.ts";

const assistant = (stopReason: string, toolCalls = 0, errorMessage: string | null = null) => ({
  stopReason,
  errorMessage,
  text: "reply",
  entryId: "e1",
  toolCalls,
});

/** A run that started once, ended with `stopReason`, and reached agent_before_settle. */
function settledRun(stopReason: string, toolCalls = 0, tools: { terminate: boolean; isError: boolean }[] = []): RunFacts {
  let facts = withAssistant(withLowLevelStart(startRun(0)), assistant(stopReason, toolCalls));
  for (const tool of tools) facts = withToolEnd(facts, tool);
  return withBeforeSettle(facts);
}

const done = { terminate: true, isError: false };
const open = { terminate: false, isError: false };
const broken = { terminate: true, isError: true };

const cases: { name: string; facts: RunFacts; settledAborted?: boolean; expected: RunOutcome["kind"]; reason?: string }[] = [
  { name: "stop is completed", facts: settledRun("stop"), expected: "completed" },
  { name: "a fully terminating final tool batch is completed", facts: settledRun("toolUse", 2, [done, done]), expected: "completed" },
  { name: "length is failed", facts: settledRun("length"), expected: "failed", reason: "length" },
  { name: "error is failed", facts: settledRun("error"), expected: "failed", reason: "error" },
  { name: "an incomplete final tool batch is failed", facts: settledRun("toolUse", 2, [done]), expected: "failed", reason: "incomplete_tool_batch" },
  {
    name: "a final batch with a non-terminating result is failed",
    facts: settledRun("toolUse", 2, [done, open]),
    expected: "failed",
    reason: "non_terminating_tool_batch",
  },
  {
    name: "a final batch with an error result is failed",
    facts: settledRun("toolUse", 2, [done, broken]),
    expected: "failed",
    reason: "tool_error_in_final_batch",
  },
  { name: "an unknown stop reason is failed", facts: settledRun("refusal"), expected: "failed", reason: "unexpected_stop_reason" },
  { name: "an aborted stop reason is interrupted", facts: settledRun("aborted"), expected: "interrupted" },
  { name: "an abort seen on the signal is interrupted even after an error", facts: withAbort(settledRun("error")), expected: "interrupted" },
  { name: "Pi's settled aborted flag is interrupted", facts: settledRun("stop"), settledAborted: true, expected: "interrupted" },
  {
    name: "0.87.1: no agent_before_settle means an abort between low-level runs",
    facts: withAssistant(withLowLevelStart(startRun(0)), assistant("error", 0, "503 overloaded")),
    expected: "interrupted",
  },
  {
    name: "1.x: settled aborted=false is trusted over a missing agent_before_settle",
    facts: withAssistant(withLowLevelStart(startRun(0)), assistant("stop")),
    settledAborted: false,
    expected: "completed",
  },
  {
    name: "0.87.1: a plain run is judged without agent_before_settle (its aborts hit a live run)",
    facts: withAssistant(withLowLevelStart(startRun(0)), assistant("stop")),
    expected: "completed",
  },
  {
    name: "0.87.1: after a compaction, no agent_before_settle means it was aborted",
    facts: withCompaction(withAssistant(withLowLevelStart(startRun(0)), assistant("stop"))),
    expected: "interrupted",
  },
  {
    name: "0.87.1: a compaction that reached agent_before_settle is completed",
    facts: withBeforeSettle(withCompaction(withAssistant(withLowLevelStart(startRun(0)), assistant("stop")))),
    expected: "completed",
  },
  {
    name: "a retry's new low-level run must reach agent_before_settle again",
    facts: withLowLevelStart(settledRun("stop")),
    expected: "interrupted",
  },
  { name: "a run that never started is silent", facts: startRun(0), expected: "silent" },
  { name: "a run without an assistant message is silent", facts: withBeforeSettle(withLowLevelStart(startRun(0))), expected: "silent" },
];

for (const c of cases) {
  test(`classifyRun: ${c.name}`, () => {
    const outcome = classifyRun(c.facts, c.settledAborted);
    assert.equal(outcome.kind, c.expected);
    if (c.reason) assert.equal(outcome.kind === "failed" && outcome.reason, c.reason);
  });
}

test("failed outcomes carry the stop reason and the error message", () => {
  const facts = withBeforeSettle(withAssistant(withLowLevelStart(startRun(0)), assistant("error", 0, "boom")));
  assert.deepEqual(classifyRun(facts, undefined), { kind: "failed", stopReason: "error", reason: "error", errorMessage: "boom" });
});

test("a later assistant message replaces the earlier one and its tool batch", () => {
  const facts = settledRun("toolUse", 1, [open]);
  const recovered = withBeforeSettle(withAssistant(facts, assistant("stop")));
  assert.equal(classifyRun(recovered, undefined).kind, "completed");
  assert.equal(recovered.finalBatch, null);
  assert.equal(recovered.toolCalls, 1, "tool counts span the whole run");
});

test("the first request names the task; steers and follow-ups do not", () => {
  const facts = withTask(withTask(startRun(0), "  build the index \n"), "and also this");
  assert.equal(facts.task, "build the index");
});

const policy = { progress: true, firstAfterMs: 1000, intervalMs: 500, toolCountThreshold: 3 };
const progressCases: { name: string; now: number; tools: number; last: { at: number; toolCalls: number } | null; enabled?: boolean; due: boolean }[] = [
  { name: "not before firstAfterMs", now: 999, tools: 0, last: null, due: false },
  { name: "at firstAfterMs", now: 1000, tools: 0, last: null, due: true },
  { name: "not within intervalMs of the last", now: 1400, tools: 0, last: { at: 1000, toolCalls: 0 }, due: false },
  { name: "after intervalMs since the last", now: 1500, tools: 0, last: { at: 1000, toolCalls: 0 }, due: true },
  { name: "early once the tool threshold is reached", now: 10, tools: 3, last: null, due: true },
  { name: "tool threshold counts since the last notice", now: 1100, tools: 5, last: { at: 1000, toolCalls: 3 }, due: false },
  { name: "never when progress notices are off", now: 5000, tools: 10, last: null, enabled: false, due: false },
];
for (const c of progressCases) {
  test(`progressDue: ${c.name}`, () => {
    let facts = startRun(0);
    for (let i = 0; i < c.tools; i++) facts = withToolEnd(facts, open);
    assert.equal(progressDue(facts, c.last, c.now, { ...policy, progress: c.enabled ?? true }), c.due);
  });
}

test("toolErrorDue honours the switch and the cooldown", () => {
  assert.equal(toolErrorDue(false, null, 0, 100), false);
  assert.equal(toolErrorDue(true, null, 0, 100), true);
  assert.equal(toolErrorDue(true, 50, 149, 100), false);
  assert.equal(toolErrorDue(true, 50, 150, 100), true);
});

test("taskInProgress reads the newest user message's text back from the branch (a run joined mid-way)", () => {
  const entries = new Map<string, BranchEntry>([
    ["u0", { id: "u0", parentId: null, type: "message", message: { role: "user", content: "older task" } }],
    ["a0", { id: "a0", parentId: "u0", type: "message", message: { role: "assistant", content: [{ type: "text", text: "done" }] } }],
    ["u1", { id: "u1", parentId: "a0", type: "message", message: { role: "user", content: [{ type: "text", text: "long job" }, { type: "image" }] } }],
    ["a1", { id: "a1", parentId: "u1", type: "message", message: { role: "assistant", content: [{ type: "toolCall" }] } }],
    ["t1", { id: "t1", parentId: "a1", type: "message", message: { role: "toolResult", content: "ok" } }],
    ["l1", { id: "l1", parentId: "t1", type: "label" }],
  ]);
  const rows: { leaf: string | undefined; expected: string }[] = [
    { leaf: "l1", expected: "long job" },
    { leaf: "u1", expected: "long job" },
    { leaf: "a0", expected: "older task" },
    { leaf: undefined, expected: "" },
  ];
  for (const row of rows) {
    const leaf = row.leaf === undefined ? undefined : entries.get(row.leaf);
    assert.equal(
      taskInProgress(leaf, (id) => entries.get(id)),
      row.expected,
      JSON.stringify(row),
    );
  }
});

test("persistedEntryId walks back from the leaf to the entry holding that very message object", () => {
  const reply = { role: "assistant" };
  const lookalike = { role: "assistant" };
  const entries = new Map<string, BranchEntry>([
    ["u1", { id: "u1", parentId: null, type: "message", message: { role: "user" } }],
    ["a0", { id: "a0", parentId: "u1", type: "message", message: lookalike }],
    ["a1", { id: "a1", parentId: "a0", type: "message", message: reply }],
    ["c1", { id: "c1", parentId: "a1", type: "custom", message: reply }],
    ["l1", { id: "l1", parentId: "c1", type: "label" }],
  ]);
  const rows: { leaf: string | undefined; message: unknown; expected: string | undefined }[] = [
    { leaf: "a1", message: reply, expected: "a1" },
    { leaf: "l1", message: reply, expected: "a1" },
    { leaf: "l1", message: lookalike, expected: "a0" },
    { leaf: "l1", message: { role: "assistant" }, expected: undefined },
    { leaf: undefined, message: reply, expected: undefined },
  ];
  for (const row of rows) {
    const leaf = row.leaf === undefined ? undefined : entries.get(row.leaf);
    assert.equal(
      persistedEntryId(row.message, leaf, (id) => entries.get(id)),
      row.expected,
      JSON.stringify({ leaf: row.leaf, expected: row.expected }),
    );
  }
});
