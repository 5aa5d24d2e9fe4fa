/** Token buckets as pure functions: the rate limits of the event, heartbeat and audit routes, kept apart from other traffic. */

export interface RateLimit {
  perMinute: number;
  burst: number;
}

export interface Bucket {
  tokens: number;
  updatedAtMs: number;
}

export type Take = { allowed: true; bucket: Bucket } | { allowed: false; bucket: Bucket; retryAfterSeconds: number };

export function fullBucket(limit: RateLimit, nowMs: number): Bucket {
  return { tokens: limit.burst, updatedAtMs: nowMs };
}

/** The bucket as it stands at `nowMs`, refilled by the time elapsed. */
function refilled(bucket: Bucket, nowMs: number, limit: RateLimit): Bucket {
  const elapsedMs = Math.max(0, nowMs - bucket.updatedAtMs);
  return { tokens: Math.min(limit.burst, bucket.tokens + (elapsedMs * limit.perMinute) / 60_000), updatedAtMs: nowMs };
}

/** Refills by elapsed time, then takes one token or says how long until one is there. */
export function takeToken(bucket: Bucket, nowMs: number, limit: RateLimit): Take {
  const now = refilled(bucket, nowMs, limit);
  if (now.tokens >= 1) return { allowed: true, bucket: { tokens: now.tokens - 1, updatedAtMs: nowMs } };
  const waitMs = ((1 - now.tokens) * 60_000) / limit.perMinute;
  return { allowed: false, bucket: now, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}

/** Takes one token from each bucket (each under its own limit), or none when any is empty: a
 * request refused by one limit does not use up the others. Retry-After is the longest wait. */
export function takeFromAll(
  buckets: readonly { bucket: Bucket; limit: RateLimit }[],
  nowMs: number,
): { allowed: boolean; buckets: Bucket[]; retryAfterSeconds: number } {
  const takes = buckets.map(({ bucket, limit }) => takeToken(bucket, nowMs, limit));
  const waits = takes.map((take) => (take.allowed ? 0 : take.retryAfterSeconds));
  if (waits.every((wait) => wait === 0)) return { allowed: true, buckets: takes.map((take) => take.bucket), retryAfterSeconds: 0 };
  return { allowed: false, buckets: buckets.map(({ bucket, limit }) => refilled(bucket, nowMs, limit)), retryAfterSeconds: Math.max(...waits) };
}

/** One bucket per key (a session, a runtime, a remote address), all under the same limit. A bucket
 * that has refilled completely holds nothing worth keeping, so `prune` forgets it. */
export class KeyedBuckets {
  readonly #buckets = new Map<string, Bucket>();
  readonly limit: RateLimit;

  constructor(limit: RateLimit) {
    this.limit = limit;
  }

  get(key: string, nowMs: number): Bucket {
    return this.#buckets.get(key) ?? fullBucket(this.limit, nowMs);
  }

  /** Whether `key` has a bucket that has not refilled since `prune` last looked. */
  has(key: string): boolean {
    return this.#buckets.has(key);
  }

  set(key: string, bucket: Bucket): void {
    this.#buckets.set(key, bucket);
  }

  prune(nowMs: number): void {
    for (const [key, bucket] of this.#buckets) {
      if (refilled(bucket, nowMs, this.limit).tokens >= this.limit.burst) this.#buckets.delete(key);
    }
  }
}

/** An agent route's limits: a bucket per session and per runtime (when the body names one) under one
 * ceiling for the whole token, so one session's flood is refused itself and never holds back another. */
export class SessionBuckets {
  readonly #bySession: KeyedBuckets;
  readonly #byRuntime: KeyedBuckets;
  readonly #totalLimit: RateLimit;
  #total: Bucket;

  constructor(limit: RateLimit, totalLimit: RateLimit, nowMs: number) {
    this.#bySession = new KeyedBuckets(limit);
    this.#byRuntime = new KeyedBuckets(limit);
    this.#totalLimit = totalLimit;
    this.#total = fullBucket(totalLimit, nowMs);
  }

  /** One token from each bucket, or none (a refused request uses up nothing). */
  take(sessionId: string, runtimeId: string | undefined, nowMs: number): { allowed: boolean; retryAfterSeconds: number } {
    const limit = this.#bySession.limit;
    const take = takeFromAll(
      [
        { bucket: this.#total, limit: this.#totalLimit },
        { bucket: this.#bySession.get(sessionId, nowMs), limit },
        ...(runtimeId === undefined ? [] : [{ bucket: this.#byRuntime.get(runtimeId, nowMs), limit }]),
      ],
      nowMs,
    );
    const [total, session, runtime] = take.buckets as [Bucket, Bucket, Bucket | undefined];
    this.#total = total;
    this.#bySession.set(sessionId, session);
    if (runtimeId !== undefined && runtime) this.#byRuntime.set(runtimeId, runtime);
    return { allowed: take.allowed, retryAfterSeconds: take.retryAfterSeconds };
  }

  /** Whether the session's bucket has not refilled since `prune` last looked. */
  hasSession(sessionId: string): boolean {
    return this.#bySession.has(sessionId);
  }

  prune(nowMs: number): void {
    this.#bySession.prune(nowMs);
    this.#byRuntime.prune(nowMs);
  }
}
