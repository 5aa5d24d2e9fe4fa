/** `run.completed` is held at every settle and released once, at the last settle of a unit of chained
 * runs; failure and cancellation end the unit at once. Holding forever or releasing each settle are both bugs. */

export type RoundEnd =
  | { kind: "completed"; had_response: boolean; answer?: string; answered_at?: string }
  | { kind: "failed"; error: string }
  | { kind: "cancelled" };

/** One settled round, or several merged. */
export type Round = RoundEnd & { duration_ms?: number; agent_name?: string };
export type CompletedRound = Extract<Round, { kind: "completed" }>;

export interface HoldDecision {
  held: CompletedRound | null;
  emit: Round | null;
}

/** Merges an earlier part of the unit into a later round: durations summed (unknown if either is
 * unknown), the first non-empty agent name, `had_response` if any round had one, and the last
 * answer given with its own `answered_at`. The later round's kind wins. */
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

/** Once the settle has quieted down: if another round already started, the unit goes on and the
 * completion stays held; otherwise it is released now. Every hold therefore ends in exactly one
 * release, failure or cancellation. */
export function onSettleQuiet(held: CompletedRound | null, nextRoundStarted: boolean): HoldDecision {
  if (held === null || nextRoundStarted) return { held, emit: null };
  return { held: null, emit: held };
}
