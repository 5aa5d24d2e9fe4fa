/** The one retry delay, for the extension's calls to the server and the server's calls out: a `Retry-After` answer, else exponential backoff with jitter. */
import { LIMITS } from "../protocol/wire.ts";

/** `Retry-After` as seconds or an HTTP date, never negative, at most 60 s; undefined when absent or unreadable. */
export function retryAfterDelayMs(header: string | string[] | null | undefined, now: number): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  // An HTTP date always names its month; without the letter check Date.parse would read "-1" as a year.
  const ms = /^\d+$/.test(value) ? Number(value) * 1000 : /[A-Za-z]/.test(value) ? Date.parse(value) - now : Number.NaN;
  if (Number.isNaN(ms)) return undefined;
  return Math.min(Math.max(ms, 0), LIMITS.retryAfterMaxMs);
}

/** The wait before attempt `attemptNumber + 1` without a `Retry-After`: doubling from `baseMs`, at most 60 s. */
export function backoffDelayMs(attemptNumber: number, baseMs: number, random: () => number): number {
  // Jitter in [50 %, 100 %) keeps several clients from retrying in lockstep after an outage.
  return Math.min(Math.round(baseMs * 2 ** (attemptNumber - 1) * (0.5 + random() / 2)), LIMITS.retryAfterMaxMs);
}
