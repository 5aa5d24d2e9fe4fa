/** The retry policy for every call to the server: `ServerError` carries the decision, `runWithRetry` applies it and returns a value. */
import { setTimeout as delay } from "node:timers/promises";
import { backoffDelayMs, retryAfterDelayMs } from "../../common/backoff.ts";
import { errorText } from "../../common/errors.ts";
import type { DeliveryFacts } from "./decisions.ts";

export class ServerError extends Error {
  declare readonly retryable: boolean;
  declare readonly retryAfterMs?: number;
  declare readonly status?: number;
  /** Stable machine code: the server's error code, a Node/undici network code, or one of ours. */
  declare readonly code?: string;
  declare readonly facts?: DeliveryFacts;
  /** Set by the client when the session's link says nobody needs a warning for it (see link.ts quietFailure). */
  quiet = false;

  constructor(message: string, details: Pick<ServerError, "retryable" | "retryAfterMs" | "status" | "code" | "facts">) {
    super(message);
    this.name = "ServerError";
    Object.assign(this, details);
  }
}

/** A non-2xx answer as an error: 408, 425, 429 and 5xx may succeed later; any other 4xx will not. */
export function classifyHttpFailure(status: number, headers: Record<string, string | string[] | undefined>, now: number, serverCode?: string): ServerError {
  const retryable = status === 408 || status === 425 || status === 429 || status >= 500;
  const retryAfterMs = retryable ? retryAfterDelayMs(headers["retry-after"], now) : undefined;
  return new ServerError(`HTTP ${status}${serverCode ? ` ${serverCode}` : ""}`, {
    retryable,
    status,
    code: serverCode ?? `http_${status}`,
    facts: { kind: "http", status, serverCode: serverCode ?? null },
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
}

/** The server refused the bearer token: the client says so once for the session, so no channel repeats it in its own words. */
export const tokenRejected = (error: ServerError): boolean => error.status === 401;

/** A failure no channel warns about: a refused token (told once by the client), or one the link marked quiet (an outage the footer shows). */
export const needsNoWarning = (error: ServerError): boolean => error.quiet || tokenRejected(error);

/** Any thrown value as a ServerError; something that is not one is a bug, and bugs are not retried. */
export function asServerError(error: unknown): ServerError {
  if (error instanceof ServerError) return error;
  return new ServerError(`internal error: ${errorText(error)}`, {
    retryable: false,
    code: "internal",
    facts: { kind: "internal", detail: errorText(error) },
  });
}

/** The wait before attempt `attemptNumber + 1`: the server's Retry-After, else exponential backoff with jitter. */
export function retryDelayMs(error: ServerError, attemptNumber: number, backoffMs: number, random: () => number): number {
  return error.retryAfterMs ?? backoffDelayMs(attemptNumber, backoffMs, random);
}

export type Sleep = (ms: number, signal?: AbortSignal) => Promise<void>;
export const realSleep: Sleep = (ms, signal) => delay(ms, undefined, signal ? { signal } : {});

export interface RetryOptions {
  maxAttempts: number;
  backoffMs: number;
  sleep: Sleep;
  random: () => number;
  signal?: AbortSignal;
}

export type RetryResult<T> = { ok: true; value: T; attempts: number } | { ok: false; error: ServerError; attempts: number };

/** What a call cut short by its caller's signal fails with: never retried. */
export const aborted = () => new ServerError("aborted", { retryable: false, code: "aborted", facts: { kind: "aborted" } });

export async function runWithRetry<T>(attempt: (attemptNumber: number) => Promise<T>, options: RetryOptions): Promise<RetryResult<T>> {
  let attempts = 0;
  for (;;) {
    if (options.signal?.aborted) return { ok: false, error: aborted(), attempts };
    attempts += 1;
    let error: ServerError;
    try {
      return { ok: true, value: await attempt(attempts), attempts };
    } catch (thrown) {
      error = asServerError(thrown);
    }
    if (!error.retryable || attempts >= options.maxAttempts) return { ok: false, error, attempts };
    try {
      await options.sleep(retryDelayMs(error, attempts, options.backoffMs, options.random), options.signal);
    } catch {
      return { ok: false, error: aborted(), attempts };
    }
  }
}
