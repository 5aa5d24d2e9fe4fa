/** A run's limits (`--anon-notify-limits`), pure: the flag's value read, which limit a run is past, when its time runs out. */
import { RunLimits } from "../../protocol/hosts.ts";

export type LimitHit = "turn_limit" | "time_limit";

/**
 * The flag's value: no limits when it is not given; `invalid` when it is not the wire's shape, which
 * the caller answers by stopping every run at its first turn (fail closed: a bound asked for is never dropped).
 */
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
