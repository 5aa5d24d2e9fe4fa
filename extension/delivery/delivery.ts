/**
 * Getting events to the notify-webhook server. Three layers, each testable alone:
 * - the retry policy: `DeliveryError` carries the decision, `classifyHttpFailure` and
 *   `retryAfterDelayMs` make it, `runWithRetry` applies it and returns a value instead of throwing;
 * - the HTTP client (undici, one kept-alive Agent): bearer token, Idempotency-Key, timeouts, answers
 *   validated with the shared protocol schemas;
 * - the notifier: what Pi handlers call. It never throws and never makes the caller wait; a final
 *   notice is sent only after its durable outbox write finished, and removed only once accepted.
 */
import { setTimeout as delay } from "node:timers/promises";
import { Agent, request as undiciRequest } from "undici";
import type { z } from "zod";
import type { Config } from "../config/config.ts";
import type { Outbox } from "./outbox.ts";
import { EventAccepted, EventBody } from "../../protocol/events.ts";
import { endpointUrl, ErrorAnswer, LIMITS } from "../../protocol/wire.ts";

// ── The retry policy ────────────────────────────────────────────────────────

export interface DeliveryErrorDetails {
  retryable: boolean;
  retryAfterMs?: number;
  status?: number;
  /** Stable machine code: the server's error code, a Node/undici network code, or one of ours. */
  code?: string;
}

export class DeliveryError extends Error {
  readonly retryable: boolean;
  readonly retryAfterMs?: number;
  readonly status?: number;
  readonly code?: string;

  constructor(message: string, details: DeliveryErrorDetails) {
    super(message);
    this.name = "DeliveryError";
    this.retryable = details.retryable;
    if (details.retryAfterMs !== undefined) this.retryAfterMs = details.retryAfterMs;
    if (details.status !== undefined) this.status = details.status;
    if (details.code !== undefined) this.code = details.code;
  }
}

export type HttpHeaders = Record<string, string | string[] | undefined>;

/** `Retry-After` as seconds or an HTTP date, never negative, at most 60 s; undefined when absent or unreadable. */
export function retryAfterDelayMs(header: string | string[] | undefined, now: number): number | undefined {
  const value = (Array.isArray(header) ? header[0] : header)?.trim();
  if (!value) return undefined;
  // An HTTP date always names its month; without the letter check Date.parse would read "-1" as a year.
  const ms = /^\d+$/.test(value) ? Number(value) * 1000 : /[A-Za-z]/.test(value) ? Date.parse(value) - now : Number.NaN;
  if (Number.isNaN(ms)) return undefined;
  return Math.min(Math.max(ms, 0), LIMITS.retryAfterMaxMs);
}

/** A non-2xx answer as an error: 408, 425, 429 and 5xx may succeed later; any other 4xx will not. */
export function classifyHttpFailure(status: number, headers: HttpHeaders, now: number, serverCode?: string): DeliveryError {
  const retryable = status === 408 || status === 425 || status === 429 || status >= 500;
  const retryAfterMs = retryable ? retryAfterDelayMs(headers["retry-after"], now) : undefined;
  return new DeliveryError(`HTTP ${status}${serverCode ? ` ${serverCode}` : ""}`, {
    retryable,
    status,
    code: serverCode ?? `http_${status}`,
    ...(retryAfterMs === undefined ? {} : { retryAfterMs }),
  });
}

/** Any thrown value as a DeliveryError; something that is not one is a bug, and bugs are not retried. */
export function asDeliveryError(error: unknown): DeliveryError {
  if (error instanceof DeliveryError) return error;
  const message = error instanceof Error ? error.message : String(error);
  return new DeliveryError(`internal error: ${message}`, { retryable: false, code: "internal" });
}

/** The wait before attempt `attemptNumber + 1`: the server's Retry-After, else exponential backoff with jitter. */
export function retryDelayMs(error: DeliveryError, attemptNumber: number, backoffMs: number, random: () => number): number {
  if (error.retryAfterMs !== undefined) return error.retryAfterMs;
  // Jitter in [50 %, 100 %) keeps several Pi processes from retrying in lockstep after an outage.
  return Math.min(Math.round(backoffMs * 2 ** (attemptNumber - 1) * (0.5 + random() / 2)), LIMITS.retryAfterMaxMs);
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

export type RetryResult<T> = { ok: true; value: T; attempts: number } | { ok: false; error: DeliveryError; attempts: number };

const aborted = () => new DeliveryError("aborted", { retryable: false, code: "aborted" });

export async function runWithRetry<T>(attempt: (attemptNumber: number) => Promise<T>, options: RetryOptions): Promise<RetryResult<T>> {
  let attempts = 0;
  for (;;) {
    if (options.signal?.aborted) return { ok: false, error: aborted(), attempts };
    attempts += 1;
    let error: DeliveryError;
    try {
      return { ok: true, value: await attempt(attempts), attempts };
    } catch (thrown) {
      error = asDeliveryError(thrown);
    }
    if (!error.retryable || attempts >= options.maxAttempts) return { ok: false, error, attempts };
    try {
      await options.sleep(retryDelayMs(error, attempts, options.backoffMs, options.random), options.signal);
    } catch {
      return { ok: false, error: aborted(), attempts };
    }
  }
}

// ── The HTTP client ─────────────────────────────────────────────────────────

export interface RequestOptions<T> {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  timeoutMs?: number;
  schema: z.ZodType<T>;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export interface WebhookClient {
  /** One POST /events; resolves only when the server accepted it with a receipt state other than `failed`. */
  postEvent(event: EventBody, signal?: AbortSignal): Promise<EventAccepted>;
  /** Any API call under the endpoint's base path; throws a DeliveryError on every failure. */
  request<T>(method: "GET" | "POST", path: string, options: RequestOptions<T>): Promise<T>;
  /** Drops the kept-alive connections and aborts anything still in flight. */
  close(): Promise<void>;
}

export interface WebhookClientOptions {
  endpoint: string;
  token: string | undefined;
  timeoutMs: number;
  now?: () => number;
}

// Node and undici codes for a connection that failed or broke; trying again may work.
const NETWORK_CODES = new Set([
  "ECONNREFUSED",
  "ECONNRESET",
  "EPIPE",
  "ETIMEDOUT",
  "EHOSTUNREACH",
  "ENETUNREACH",
  "ENOTFOUND",
  "EAI_AGAIN",
  "UND_ERR_SOCKET",
  "UND_ERR_CLOSED",
  "UND_ERR_CONNECT_TIMEOUT",
  "UND_ERR_HEADERS_TIMEOUT",
  "UND_ERR_BODY_TIMEOUT",
]);

function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  // undici wraps the socket error; the useful code may sit one cause down.
  for (let depth = 0; depth < 3 && current instanceof Error; depth += 1) {
    const code = (current as NodeJS.ErrnoException).code;
    if (code) return code;
    current = current.cause;
  }
  return undefined;
}

export function createWebhookClient(options: WebhookClientOptions): WebhookClient {
  const now = options.now ?? Date.now;
  // One kept-alive pool for all calls: heartbeats and events reuse the same connection.
  const agent = new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000 });
  const redact = (text: string) => (options.token ? text.split(options.token).join("[token]") : text);

  async function request<T>(method: "GET" | "POST", path: string, opts: RequestOptions<T>): Promise<T> {
    const url = new URL(endpointUrl(options.endpoint, path));
    for (const [key, value] of Object.entries(opts.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
    const timeoutMs = opts.timeoutMs ?? options.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";

    let response: Awaited<ReturnType<typeof undiciRequest>>;
    let text: string;
    try {
      response = await undiciRequest(url, {
        dispatcher: agent,
        method,
        headers,
        body: opts.body === undefined ? null : JSON.stringify(opts.body),
        signal,
      });
      text = await response.body.text();
    } catch (error) {
      if (opts.signal?.aborted) throw aborted();
      if (timeout.aborted) throw new DeliveryError(`no answer within ${timeoutMs} ms`, { retryable: true, code: "timeout" });
      const code = networkCode(error);
      const message = redact(error instanceof Error ? error.message : String(error));
      throw new DeliveryError(`${method} ${path} failed: ${code ?? "error"} ${message}`.trim(), {
        retryable: code !== undefined && NETWORK_CODES.has(code),
        code: code ?? "network",
      });
    }

    let json: unknown;
    try {
      json = text === "" ? undefined : JSON.parse(text);
    } catch {
      json = undefined;
    }
    if (response.statusCode < 200 || response.statusCode > 299) {
      const serverError = ErrorAnswer.safeParse(json);
      throw classifyHttpFailure(response.statusCode, response.headers, now(), serverError.success ? serverError.data.error : undefined);
    }
    const answer = opts.schema.safeParse(json);
    if (!answer.success) {
      const issues = answer.error.issues.map((i) => `${i.path.join(".") || "(body)"}: ${i.message}`).join("; ");
      throw new DeliveryError(`HTTP ${response.statusCode} with an invalid answer: ${issues}`, {
        retryable: false,
        status: response.statusCode,
        code: "invalid_answer",
      });
    }
    return answer.data;
  }

  return {
    request,
    async postEvent(event, signal) {
      const accepted = await request("POST", "events", {
        body: event,
        schema: EventAccepted,
        headers: { "idempotency-key": event.event_id },
        ...(signal ? { signal } : {}),
      });
      if (accepted.event_id !== event.event_id) {
        throw new DeliveryError(`answer names event ${accepted.event_id}, not ${event.event_id}`, { retryable: false, code: "invalid_answer" });
      }
      // The server took it but already knows it cannot deliver it: not a success, and resending the
      // same event_id only returns the same stored receipt.
      if (accepted.state === "failed") throw new DeliveryError("receipt state failed", { retryable: false, code: "receipt_failed" });
      return accepted;
    },
    async close() {
      await agent.destroy();
    },
  };
}

// ── The notifier ────────────────────────────────────────────────────────────

export interface DeliveryLog {
  info(message: string): void;
  warn(message: string): void;
  debug?(message: string): void;
}

export interface SendOptions {
  /** completed / failed: written to the outbox before it is sent, and never rate limited. */
  final: boolean;
  /**
   * Whether a non-final notice shares `delivery.minIntervalMs` with the other progress-type notices
   * (the default: started, progress, tool_error). An explicit request from another extension does
   * not: it carries its own event id, and the server's idempotency and rate limit still apply.
   */
  throttled?: boolean;
}

export interface Notifier {
  /** Queues the event and returns at once; a final's outbox write starts now and its send waits for it. */
  send(event: EventBody, options: SendOptions): void;
  /** Waits for queued and in-flight sends, at most timeoutMs (reload and shutdown). */
  flush(timeoutMs: number): Promise<void>;
  /** Sends what the outbox holds, oldest first, after pruning entries older than outboxMaxAgeMs. Never rejects. */
  resendOutbox(): Promise<void>;
  /** Stops: aborts waits and requests in flight; unsent finals stay in the outbox for the next start. */
  close(): Promise<void>;
}

export interface NotifierOptions {
  client: Pick<WebhookClient, "postEvent">;
  outbox: Outbox;
  delivery: Config["delivery"];
  log: DeliveryLog;
  now?: () => number;
  sleep?: Sleep;
  random?: () => number;
}

/** Progress-type notices are rate limited; finals and explicit requests never are, so a completion is not swallowed by a recent progress. */
export function nonFinalAllowed(lastNonFinalAt: number | undefined, now: number, minIntervalMs: number): boolean {
  return lastNonFinalAt === undefined || now - lastNonFinalAt >= minIntervalMs;
}

const ACCEPTED_MEMORY = 1000;

export function createNotifier(options: NotifierOptions): Notifier {
  const { client, outbox, delivery, log } = options;
  const now = options.now ?? Date.now;
  const sleep = options.sleep ?? realSleep;
  const random = options.random ?? Math.random;
  const stop = new AbortController();
  // One chain: sends go out in the order Pi produced them, one at a time.
  let tail: Promise<void> = Promise.resolve();
  // Queued or in flight here, and recently accepted: an event_id in either is never sent again by this notifier.
  const queued = new Set<string>();
  const accepted = new Set<string>();
  let lastNonFinalAt: number | undefined;

  const enqueue = (job: () => Promise<void>): Promise<void> => {
    tail = tail.then(job).catch((error: unknown) => log.warn(`通知发送出现内部错误 (internal delivery error): ${asDeliveryError(error).message}`));
    return tail;
  };

  const remember = (eventId: string) => {
    accepted.add(eventId);
    if (accepted.size > ACCEPTED_MEMORY) accepted.delete(accepted.values().next().value!);
  };

  const post = (event: EventBody) =>
    runWithRetry((_attempt) => client.postEvent(event, stop.signal), {
      maxAttempts: delivery.maxAttempts,
      backoffMs: delivery.backoffMs,
      sleep,
      random,
      signal: stop.signal,
    });

  /** Starts the durable write; resolves false (with a warning) when the outbox cannot take it. */
  const writeFinal = (event: EventBody): Promise<boolean> =>
    outbox.put(event, now()).then(
      () => true,
      (error: unknown) => {
        log.warn(`最终通知 ${event.event_id} 无法写入 outbox (${outbox.dir}): ${asDeliveryError(error).message}`);
        return false;
      },
    );

  /** Sends one outbox entry under a claim; `durable: false` when the outbox write itself failed. */
  const deliverFinal = async (event: EventBody, durable: boolean): Promise<RetryResult<EventAccepted> | undefined> => {
    if (durable && !(await outbox.claim(event.event_id, now()))) {
      log.debug?.(`最终通知 ${event.event_id} 已由其他进程发送或处理 (claimed elsewhere)`);
      return undefined;
    }
    const result = await post(event);
    if (result.ok) {
      remember(event.event_id);
      // Only now: a crash before this line sends it again, which the server's idempotency absorbs.
      if (durable) await outbox.remove(event.event_id);
      log.debug?.(`最终通知 ${event.event_id} 已送达 (accepted: ${result.value.state})`);
    } else {
      if (durable) await outbox.release(event.event_id);
      log.warn(
        `最终通知 ${event.event_id} 未送达（${result.attempts} 次尝试）：${result.error.message}` +
          (durable ? "；已保留在 outbox，下次启动时重发 (kept in the outbox)" : "；outbox 不可用，通知已丢失 (outbox unavailable)"),
      );
    }
    return result;
  };

  const deliverNonFinal = async (event: EventBody) => {
    const result = await post(event);
    if (result.ok) remember(event.event_id);
    else log.warn(`通知 ${event.event_id}（${event.status}）未送达（${result.attempts} 次尝试）：${result.error.message}`);
  };

  return {
    send(event, { final, throttled = true }) {
      try {
        const parsed = EventBody.safeParse(event);
        if (!parsed.success) {
          log.warn(`通知事件无效，未发送 (invalid event): ${parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; ")}`);
          return;
        }
        const valid = parsed.data;
        if (queued.has(valid.event_id) || accepted.has(valid.event_id)) {
          log.debug?.(`重复的通知 ${valid.event_id} 已忽略 (duplicate)`);
          return;
        }
        if (!final && stop.signal.aborted) {
          log.debug?.(`通知 ${valid.event_id}（${valid.status}）在停止后到达，已跳过 (notifier closed)`);
          return;
        }
        if (!final && throttled) {
          if (!nonFinalAllowed(lastNonFinalAt, now(), delivery.minIntervalMs)) {
            log.debug?.(`通知 ${valid.event_id}（${valid.status}）在最小间隔内，已跳过 (rate limited)`);
            return;
          }
          lastNonFinalAt = now();
        }
        // Started here, beside the queue, so the fsyncs overlap the sends ahead of it.
        const written = final ? writeFinal(valid) : undefined;
        queued.add(valid.event_id);
        void enqueue(async () => {
          try {
            if (!written) await deliverNonFinal(valid);
            else {
              // Sent only once on disk; a closed notifier keeps it there for the next start.
              const durable = await written;
              if (!stop.signal.aborted) await deliverFinal(valid, durable);
            }
          } finally {
            queued.delete(valid.event_id);
          }
        });
      } catch (error) {
        log.warn(`通知发送出现内部错误 (internal delivery error): ${asDeliveryError(error).message}`);
      }
    },

    async flush(timeoutMs) {
      const timer = new AbortController();
      await Promise.race([tail, delay(timeoutMs, undefined, { signal: timer.signal, ref: false }).catch(() => undefined)]);
      timer.abort();
    },

    resendOutbox() {
      return enqueue(async () => {
        const pruned = await outbox.prune(delivery.outboxMaxAgeMs, now());
        if (pruned.length > 0) {
          log.warn(`outbox 中 ${pruned.length} 条最终通知超过保留期仍未送达，已删除 (expired): ${pruned.join(", ")}`);
        }
        for (const entry of await outbox.list()) {
          if (stop.signal.aborted) return;
          if (queued.has(entry.event.event_id)) continue;
          const result = await deliverFinal(entry.event, true);
          // The server is unreachable or busy: the rest would fail the same way, so keep them for the next start.
          if (result && !result.ok && result.error.retryable) return;
        }
      });
    },

    async close() {
      stop.abort();
      await tail;
    },
  };
}
