import { test } from "node:test";
import assert from "node:assert/strict";
import { mergeRounds, onRoundSettled, onSettleQuiet, type CompletedRound, type Round } from "../../extension/sink/hold-rules.ts";

const done = (n: number, extra: Partial<CompletedRound> = {}): CompletedRound => ({
  kind: "completed",
  duration_ms: n * 1000,
  had_response: true,
  answer: `answer ${n}`,
  answered_at: `2026-11-30T03:0${n}:00.000Z`,
  ...extra,
});

/** Drives the rule like the sink does: settle each round, then the quiet check with `more` telling whether another round began. */
function run(rounds: { round: Round; more: boolean }[]): Round[] {
  let held: CompletedRound | null = null;
  const sent: Round[] = [];
  for (const { round, more } of rounds) {
    const settled = onRoundSettled(held, round);
    held = settled.held;
    if (settled.emit) sent.push(settled.emit);
    const quiet = onSettleQuiet(held, more);
    held = quiet.held;
    if (quiet.emit) sent.push(quiet.emit);
  }
  assert.equal(held, null, "nothing may stay held once the last round has settled");
  return sent;
}

test("a single round completes exactly once", () => {
  assert.deepEqual(run([{ round: done(1), more: false }]), [done(1)]);
});

test("an N-round unit reports completion once, not N times (the 'sent N times' bug)", () => {
  for (const n of [2, 3, 10]) {
    const rounds = Array.from({ length: n }, (_, i) => ({ round: done(i + 1), more: i < n - 1 }));
    const sent = run(rounds);
    assert.equal(sent.length, 1, `${n} rounds`);
    assert.equal(sent[0]?.kind, "completed");
  }
});

test("the completion held over the rounds is released when the last one settles (the 'held forever' bug)", () => {
  let held: CompletedRound | null = null;
  held = onRoundSettled(held, done(1)).held;
  assert.notEqual(held, null);
  assert.equal(onSettleQuiet(held, true).emit, null, "still held while another round runs");
  held = onRoundSettled(held, done(2)).held;
  const released = onSettleQuiet(held, false);
  assert.equal(released.held, null);
  assert.equal(released.emit?.kind, "completed");
});

test("merging sums durations, ORs had_response, keeps the first agent name and the last answer", () => {
  const sent = run([
    { round: done(1, { had_response: true, agent_name: undefined }), more: true },
    { round: done(2, { agent_name: "refactor" }), more: true },
    { round: done(3, { had_response: false, answer: undefined, answered_at: undefined, agent_name: "other" }), more: true },
    { round: done(4, { had_response: false, agent_name: "" }), more: false },
  ]);
  assert.deepEqual(sent, [
    { kind: "completed", duration_ms: 10_000, had_response: true, agent_name: "refactor", answer: "answer 4", answered_at: "2026-11-30T03:04:00.000Z" },
  ]);
});

test("a later round without an answer keeps the last answer given, with its own answered_at", () => {
  const merged = mergeRounds(done(1), done(2, { had_response: false, answer: undefined, answered_at: undefined }));
  assert.equal(merged.kind === "completed" && merged.answer, "answer 1");
  assert.equal(merged.kind === "completed" && merged.answered_at, "2026-11-30T03:01:00.000Z");
});

test("an unknown duration in any round makes the sum unknown, never a partial number", () => {
  const merged = mergeRounds(done(1), done(2, { duration_ms: undefined }));
  assert.equal(merged.duration_ms, undefined);
});

test("failure and cancellation are never held and end the unit with what was held", () => {
  const cases: Round[] = [
    { kind: "failed", error: "ModelError: 503", duration_ms: 500 },
    { kind: "cancelled", duration_ms: 500 },
  ];
  for (const end of cases) {
    assert.deepEqual(onRoundSettled(null, end), { held: null, emit: end });
    const sent = run([
      { round: done(1, { agent_name: "first" }), more: true },
      { round: end, more: false },
    ]);
    assert.equal(sent.length, 1);
    assert.equal(sent[0]?.kind, end.kind);
    assert.equal(sent[0]?.duration_ms, 1500);
    assert.equal(sent[0]?.agent_name, "first");
  }
});

test("a new unit after a release starts from nothing", () => {
  const sent = run([
    { round: done(1), more: false },
    { round: done(2), more: false },
  ]);
  assert.deepEqual(sent, [done(1), done(2)]);
});
