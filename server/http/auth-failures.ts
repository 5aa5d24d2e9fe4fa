/** Wrong tokens per remote address: after a burst, `429` instead of `401` and one log line. A right token
 * is always served, even from a throttled address, so a local process cannot lock Pi out. */
import { fullBucket, takeToken, type Bucket, type RateLimit } from "../rate-limit-rules.ts";

export const AUTH_FAILURE_LIMIT: RateLimit = { perMinute: 30, burst: 20 };

/** Addresses remembered at most; beyond this, the ones whose burst is over are forgotten first. */
const MAX_ADDRESSES = 10_000;

export type FailureState = { bucket: Bucket; logged: boolean };

export type FailureVerdict = { refuse: false } | { refuse: true; retryAfterSeconds: number; firstOfBurst: boolean };

/** One more wrong token from an address in `state`: a plain 401, or a 429 (the first of a burst is logged). */
export function recordFailure(state: FailureState | undefined, nowMs: number, limit: RateLimit): { state: FailureState; verdict: FailureVerdict } {
  const take = takeToken(state?.bucket ?? fullBucket(limit, nowMs), nowMs, limit);
  if (take.allowed) {
    // Only a bucket that had refilled completely (a quiet spell) ends a burst; the next one is logged anew.
    const burstOver = take.bucket.tokens + 1 >= limit.burst;
    return { state: { bucket: take.bucket, logged: Boolean(state?.logged) && !burstOver }, verdict: { refuse: false } };
  }
  const firstOfBurst = !state?.logged;
  return { state: { bucket: take.bucket, logged: true }, verdict: { refuse: true, retryAfterSeconds: take.retryAfterSeconds, firstOfBurst } };
}

export class AuthFailures {
  readonly #states = new Map<string, FailureState>();
  readonly #limit: RateLimit;
  readonly #onBurst: (address: string) => void;

  constructor(limit: RateLimit, onBurst: (address: string) => void) {
    this.#limit = limit;
    this.#onBurst = onBurst;
  }

  /** Records a wrong token from `address`; returns the seconds to wait when it must be refused with 429. */
  record(address: string, nowMs = Date.now()): number | null {
    const { state, verdict } = recordFailure(this.#states.get(address), nowMs, this.#limit);
    this.#states.delete(address);
    this.#states.set(address, state);
    if (this.#states.size > MAX_ADDRESSES) this.#states.delete(this.#states.keys().next().value!);
    if (!verdict.refuse) return null;
    if (verdict.firstOfBurst) this.#onBurst(address);
    return verdict.retryAfterSeconds;
  }
}
