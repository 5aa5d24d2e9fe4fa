/** A token bucket as a pure function: the event route's rate limit, kept apart from other traffic. */

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

/** Refills by elapsed time, then takes one token or says how long until one is there. */
export function takeToken(bucket: Bucket, nowMs: number, limit: RateLimit): Take {
  const refillPerMs = limit.perMinute / 60_000;
  const elapsedMs = Math.max(0, nowMs - bucket.updatedAtMs);
  const tokens = Math.min(limit.burst, bucket.tokens + elapsedMs * refillPerMs);
  if (tokens >= 1) return { allowed: true, bucket: { tokens: tokens - 1, updatedAtMs: nowMs } };
  const waitMs = (1 - tokens) / refillPerMs;
  return { allowed: false, bucket: { tokens, updatedAtMs: nowMs }, retryAfterSeconds: Math.max(1, Math.ceil(waitMs / 1000)) };
}
