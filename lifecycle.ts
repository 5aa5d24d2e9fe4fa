/** Run facts and the pure decisions made from them: how a run ended, which optional notice is due, which of its limits it is past. */
import type { FailureReason } from "./common/failure-words.ts";
import { RunLimits } from "./protocol/hosts.ts";

/** What the last assistant message of a run said, as far as a notice needs it. */
export interface AssistantFacts {
  stopReason: string;
  errorMessage: string | null;
  text: string;
  /** The session entry that holds it: a stable, per-session id for the run's final notice. */
  entryId: string | null;
  toolCalls: number;
}

/** Everything recorded for one top-level run, from its first `agent_start` to `agent_settled`. */
export interface RunFacts {
  startedAt: number;
  /** False for a run joined in progress (switched on mid-run): `startedAt` is then when it was joined. */
  startKnown: boolean;
  task: string;
  /** Low-level runs (`agent_start`s): more than one means retries, compaction or continuations. */
  lowLevelRuns: number;
  abortSeen: boolean;
  /** Pi 0.87.1 skips `agent_before_settle` exactly when the run was aborted; reset per low-level run. */
  beforeSettleSeen: boolean;
  /** An error reply (a retry may follow) or a compaction: what can be aborted with no live run to see it. */
  betweenRunsRisk: boolean;
  lastAssistant: AssistantFacts | null;
  /** The tool batch answering the last assistant message; `terminate` is only visible live: Pi does not persist it. */
  finalBatch: { finished: number; terminating: number; errors: number } | null;
  toolCalls: number;
  toolErrors: number;
  /** Turns started (`turn_start`s) across the run's low-level runs. */
  turns: number;
  /** Set when the extension stopped the run past its limits: the abort then reads as this failure. */
  limitHit: LimitHit | null;
}

export function startRun(now: number): RunFacts {
  return {
    startedAt: now,
    startKnown: true,
    task: "",
    lowLevelRuns: 0,
    abortSeen: false,
    beforeSettleSeen: false,
    betweenRunsRisk: false,
    lastAssistant: null,
    finalBatch: null,
    toolCalls: 0,
    toolErrors: 0,
    turns: 0,
    limitHit: null,
  };
}

export function withTurn(facts: RunFacts): RunFacts {
  return { ...facts, turns: facts.turns + 1 };
}

export function withLimitHit(facts: RunFacts, limit: LimitHit): RunFacts {
  return facts.limitHit ? facts : { ...facts, limitHit: limit };
}

export function withLowLevelStart(facts: RunFacts): RunFacts {
  return { ...facts, lowLevelRuns: facts.lowLevelRuns + 1, beforeSettleSeen: false };
}

/** The first user-visible request of the run names its task; later ones (steers, follow-ups) do not. */
export function withTask(facts: RunFacts, text: string): RunFacts {
  return facts.task === "" ? { ...facts, task: text.trim() } : facts;
}

export function withAssistant(facts: RunFacts, assistant: AssistantFacts): RunFacts {
  return {
    ...facts,
    betweenRunsRisk: facts.betweenRunsRisk || assistant.stopReason === "error",
    lastAssistant: assistant,
    finalBatch: assistant.toolCalls > 0 ? { finished: 0, terminating: 0, errors: 0 } : null,
  };
}

export function withAssistantEntry(facts: RunFacts, entryId: string): RunFacts {
  return facts.lastAssistant ? { ...facts, lastAssistant: { ...facts.lastAssistant, entryId } } : facts;
}

export function withToolEnd(facts: RunFacts, result: { terminate: boolean; isError: boolean }): RunFacts {
  const batch = facts.finalBatch ?? { finished: 0, terminating: 0, errors: 0 };
  return {
    ...facts,
    toolCalls: facts.toolCalls + 1,
    toolErrors: facts.toolErrors + (result.isError ? 1 : 0),
    finalBatch: {
      finished: batch.finished + 1,
      terminating: batch.terminating + (result.terminate ? 1 : 0),
      errors: batch.errors + (result.isError ? 1 : 0),
    },
  };
}

export function withAbort(facts: RunFacts): RunFacts {
  return facts.abortSeen ? facts : { ...facts, abortSeen: true };
}

export function withBeforeSettle(facts: RunFacts): RunFacts {
  return { ...facts, beforeSettleSeen: true };
}

export function withCompaction(facts: RunFacts): RunFacts {
  return { ...facts, betweenRunsRisk: true };
}

/** Whether Pi 0.87.1's `agent_before_settle` must be watched (at a context preview per settle) to tell an abort with no live low-level run. */
export function needsSettleTell(facts: RunFacts): boolean {
  return facts.betweenRunsRisk || facts.lowLevelRuns > 1;
}

export type RunOutcome =
  | { kind: "completed"; stopReason: string }
  | { kind: "failed"; stopReason: string; reason: FailureReason; errorMessage: string | null }
  | { kind: "interrupted" }
  | { kind: "silent" };

/** Decides once per settled run how it ended; `settledAborted` is Pi ≥ 1.1's `agent_settled.aborted` (undefined on 0.87.1: the facts decide). */
export function classifyRun(facts: RunFacts, settledAborted: boolean | undefined): RunOutcome {
  if (facts.lowLevelRuns === 0) return { kind: "silent" };
  // A run the extension stopped at its limits is told as failed for that reason; any other abort is the person's and silent.
  const interrupted: RunOutcome = facts.limitHit
    ? { kind: "failed", stopReason: "aborted", reason: facts.limitHit, errorMessage: null }
    : { kind: "interrupted" };
  if (settledAborted === true || facts.abortSeen) return interrupted;
  // An abort between low-level runs (retry back-off, compaction) leaves no aborted signal behind.
  if (settledAborted === undefined && needsSettleTell(facts) && !facts.beforeSettleSeen) return interrupted;
  const last = facts.lastAssistant;
  if (!last) return { kind: "silent" };
  const failed = (reason: FailureReason): RunOutcome => ({ kind: "failed", stopReason: last.stopReason, reason, errorMessage: last.errorMessage });
  switch (last.stopReason) {
    case "aborted":
      return interrupted;
    case "stop":
      return { kind: "completed", stopReason: "stop" };
    case "length":
      return failed("length");
    case "error":
      return failed("error");
    case "toolUse": {
      const batch = facts.finalBatch;
      if (!batch || batch.finished < last.toolCalls) return failed("incomplete_tool_batch");
      if (batch.errors > 0) return failed("tool_error_in_final_batch");
      if (batch.terminating < last.toolCalls) return failed("non_terminating_tool_batch");
      return { kind: "completed", stopReason: "toolUse" };
    }
    default:
      return failed("unexpected_stop_reason");
  }
}

export interface ProgressPolicy {
  progress: boolean;
  firstAfterMs: number;
  intervalMs: number;
  toolCountThreshold: number;
}

export type ProgressMark = { at: number; toolCalls: number };

/** A progress notice is due after `firstAfterMs` and then every `intervalMs`, or once `toolCountThreshold` more tools have finished. */
export function progressDue(facts: RunFacts, last: ProgressMark | null, now: number, policy: ProgressPolicy): boolean {
  if (!policy.progress) return false;
  const toolsSince = facts.toolCalls - (last?.toolCalls ?? 0);
  if (toolsSince >= policy.toolCountThreshold) return true;
  if (!last) return now - facts.startedAt >= policy.firstAfterMs;
  return now - last.at >= policy.intervalMs;
}

export function toolErrorDue(enabled: boolean, lastNoticeAt: number | null, now: number, cooldownMs: number): boolean {
  return enabled && (lastNoticeAt === null || now - lastNoticeAt >= cooldownMs);
}

export type LimitHit = "turn_limit" | "time_limit";

/** The flag's value; `invalid` when not the wire's shape, which the caller answers by stopping every run at its first turn (fail closed). */
export function limitsFromFlag(value: unknown): { limits: RunLimits | null } | { invalid: true } {
  if (value === undefined || value === false) return { limits: null };
  try {
    const parsed = RunLimits.safeParse(typeof value === "string" ? JSON.parse(value) : undefined);
    return parsed.success ? { limits: parsed.data } : { invalid: true };
  } catch {
    return { invalid: true };
  }
}

/** The limit a run is past: more turns started than allowed, or its minutes used up; undefined while within both. */
export function limitHit(limits: RunLimits, run: { turns: number; elapsedMs: number }): LimitHit | undefined {
  if (limits.turns !== undefined && run.turns > limits.turns) return "turn_limit";
  if (limits.minutes !== undefined && run.elapsedMs >= limits.minutes * 60_000) return "time_limit";
  return undefined;
}

/** Milliseconds until the time limit of a run `elapsedMs` old falls due (0 when already past); undefined without one. */
export function msUntilTimeLimit(limits: RunLimits, elapsedMs: number): number | undefined {
  return limits.minutes === undefined ? undefined : Math.max(0, limits.minutes * 60_000 - elapsedMs);
}
