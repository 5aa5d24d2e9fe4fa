/** Run limits, pure: the flag read, which limit a run is past, when the time limit falls due, and how such a stop is classified. */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import {
  classifyRun,
  limitHit,
  limitsFromFlag,
  msUntilTimeLimit,
  startRun,
  withAbort,
  withAssistant,
  withLimitHit,
  withLowLevelStart,
  withTurn,
} from "../../lifecycle.ts";
import type { RunLimits } from "../../protocol/hosts.ts";

const MINUTE = 60_000;

test("limitHit: past the turns, or at the minutes, never within both", () => {
  const rows: { limits: RunLimits; turns: number; elapsedMs: number; expected: ReturnType<typeof limitHit> }[] = [
    { limits: {}, turns: 10_000, elapsedMs: 10_000 * MINUTE, expected: undefined },
    { limits: { turns: 3 }, turns: 3, elapsedMs: 0, expected: undefined },
    { limits: { turns: 3 }, turns: 4, elapsedMs: 0, expected: "turn_limit" },
    { limits: { minutes: 2 }, turns: 50, elapsedMs: 2 * MINUTE - 1, expected: undefined },
    { limits: { minutes: 2 }, turns: 0, elapsedMs: 2 * MINUTE, expected: "time_limit" },
    { limits: { turns: 1, minutes: 1 }, turns: 2, elapsedMs: MINUTE, expected: "turn_limit" },
    // Fail closed: an invalid flag becomes no turns at all.
    { limits: { turns: 0 }, turns: 1, elapsedMs: 0, expected: "turn_limit" },
  ];
  for (const row of rows) assert.equal(limitHit(row.limits, row), row.expected, JSON.stringify(row));
});

test("limitHit agrees with the bounds for any limits and run", () => {
  fc.assert(
    fc.property(
      fc.option(fc.integer({ min: 1, max: 1000 }), { nil: undefined }),
      fc.option(fc.integer({ min: 1, max: 1440 }), { nil: undefined }),
      fc.nat(2000),
      fc.nat(2000 * MINUTE),
      (turns, minutes, ran, elapsedMs) => {
        const limits = { ...(turns ? { turns } : {}), ...(minutes ? { minutes } : {}) };
        const overTurns = turns !== undefined && ran > turns;
        const overTime = minutes !== undefined && elapsedMs >= minutes * MINUTE;
        const hit = limitHit(limits, { turns: ran, elapsedMs });
        assert.equal(hit !== undefined, overTurns || overTime);
        if (overTurns) assert.equal(hit, "turn_limit");
        const wait = msUntilTimeLimit(limits, elapsedMs);
        assert.equal(wait === undefined, minutes === undefined);
        if (wait !== undefined) assert.equal(wait === 0, overTime);
      },
    ),
  );
});

test("limitsFromFlag: absent is no limits; the wire's shape is read; anything else is invalid", () => {
  assert.deepEqual(limitsFromFlag(undefined), { limits: null });
  assert.deepEqual(limitsFromFlag(false), { limits: null });
  assert.deepEqual(limitsFromFlag('{"turns":5,"minutes":10}'), { limits: { turns: 5, minutes: 10 } });
  assert.deepEqual(limitsFromFlag('{"minutes":1}'), { limits: { minutes: 1 } });
  for (const bad of [true, "", "5", "{", '{"turns":0}', '{"turns":1.5}', '{"turns":"3"}', '{"minutes":-1}', '{"turns":3,"hours":1}', "null"]) {
    const read = limitsFromFlag(bad);
    assert.deepEqual(read, { invalid: true }, `${JSON.stringify(bad)} is refused`);
  }
});

test("classifyRun: an abort the limits made is a failure for that limit; any other abort stays silent", () => {
  const aborted = withAbort(withTurn(withLowLevelStart(startRun(0))));
  assert.deepEqual(classifyRun(aborted, true), { kind: "interrupted" });
  for (const limit of ["turn_limit", "time_limit"] as const) {
    const stopped = withLimitHit(aborted, limit);
    assert.deepEqual(classifyRun(stopped, true), { kind: "failed", stopReason: "aborted", reason: limit, errorMessage: null });
    // Pi 0.87.1: no settled flag, the aborted reply tells it.
    const viaReply = withLimitHit(
      withAssistant(withLowLevelStart(startRun(0)), { stopReason: "aborted", errorMessage: null, text: "", entryId: null, toolCalls: 0 }),
      limit,
    );
    assert.equal(classifyRun(viaReply, undefined).kind, "failed");
  }
  // The first limit hit is kept.
  assert.equal(withLimitHit(withLimitHit(aborted, "time_limit"), "turn_limit").limitHit, "time_limit");
  // A run that finished before the stop took is told as it really ended.
  const finished = withLimitHit(
    withAssistant(withLowLevelStart(startRun(0)), { stopReason: "stop", errorMessage: null, text: "ok", entryId: null, toolCalls: 0 }),
    "time_limit",
  );
  assert.equal(classifyRun({ ...finished, beforeSettleSeen: true }, false).kind, "completed");
});
