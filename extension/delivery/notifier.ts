/**
 * The notifier: what the extension's handlers call. It never throws and never makes the caller
 * wait; a final notice is sent only after its durable outbox write finished, and removed only once
 * accepted. Sends go out one at a time, in the order they were handed over.
 */
import { setTimeout as delay } from "node:timers/promises";
import type { Config } from "../config/schema.ts";
import type { Messages } from "../messages.ts";
import { EventBody, type EventAccepted } from "../../protocol/events.ts";
import { formatIssues } from "../../protocol/wire.ts";
import type { WebhookClient } from "./http-client.ts";
import type { Outbox } from "./outbox.ts";
import { asDeliveryError, needsNoWarning, realSleep, runWithRetry, tokenRejected, type DeliveryError, type RetryResult, type Sleep } from "./retry.ts";

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
  /**
   * Waits for queued and in-flight sends, at most timeoutMs (reload and shutdown). Resolves true
   * when everything handed over so far was done with, false when the time ran out first.
   */
  flush(timeoutMs: number): Promise<boolean>;
  /** Sends what the outbox holds, oldest first, after pruning entries older than outboxMaxAgeMs. Never rejects. */
  resendOutbox(): Promise<void>;
  /**
   * The server answered another request (a heartbeat): finals held back by an outage are resent
   * now rather than at the next start. Does nothing when none are held back.
   */
  serverAnswered(): void;
  /** Stops: aborts waits and requests in flight; unsent finals stay in the outbox for the next start. */
  close(): Promise<void>;
  /** What became of the newest send that finished (for the doctor); undefined before the first. */
  lastDelivery(): LastDelivery | undefined;
}

export type LastDelivery = { eventId: string; status: EventBody["status"]; at: number } & (
  | { ok: true; state: EventAccepted["state"] }
  | { ok: false; attempts: number; error: string }
);

export interface NotifierOptions {
  client: Pick<WebhookClient, "postEvent">;
  outbox: Outbox;
  delivery: Config["delivery"];
  log: DeliveryLog;
  /** The warnings' words, in the session's language. */
  text: Messages["delivery"];
  now?: () => number;
  sleep?: Sleep;
  random?: () => number;
  /** While finals are held back, the outbox is tried again this often (default 60 s). */
  outboxRetryMs?: number;
  /** The outbox may hold more or fewer undelivered finals now (one was held back, or a resend ended). */
  heldChanged?: () => void;
  /** The server took a notice, with the receipt state it answered (to follow one still in progress). */
  accepted?: (eventId: string, state: EventAccepted["state"]) => void;
}

const OUTBOX_RETRY_MS = 60_000;

/** Progress-type notices are rate limited; finals and explicit requests never are, so a completion is not swallowed by a recent progress. */
export function nonFinalAllowed(lastNonFinalAt: number | undefined, now: number, minIntervalMs: number): boolean {
  return lastNonFinalAt === undefined || now - lastNonFinalAt >= minIntervalMs;
}

const ACCEPTED_MEMORY = 1000;

export function createNotifier(options: NotifierOptions): Notifier {
  const { client, outbox, delivery, log, text: t } = options;
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
  /**
   * Finals this notifier could not deliver wait in the outbox. While any do, a new final goes
   * through the outbox oldest first behind them, so a newer final never overtakes an older one.
   */
  let heldBack = false;
  let retryTimer: NodeJS.Timeout | undefined;
  let last: LastDelivery | undefined;

  const enqueue = (job: () => Promise<void>): Promise<void> => {
    tail = tail.then(job).catch((error: unknown) => log.warn(t.internalError(asDeliveryError(error).message)));
    return tail;
  };

  const remember = (eventId: string) => {
    accepted.add(eventId);
    if (accepted.size > ACCEPTED_MEMORY) accepted.delete(accepted.values().next().value!);
  };

  const post = async (event: EventBody) => {
    const result = await runWithRetry((_attempt) => client.postEvent(event, stop.signal), {
      maxAttempts: delivery.maxAttempts,
      backoffMs: delivery.backoffMs,
      sleep,
      random,
      signal: stop.signal,
    });
    const done = { eventId: event.event_id, status: event.status, at: now() };
    last = result.ok ? { ...done, ok: true, state: result.value.state } : { ...done, ok: false, attempts: result.attempts, error: result.error.message };
    if (result.ok) options.accepted?.(event.event_id, result.value.state);
    return result;
  };
  // A refused token is told once by the client; these warnings would only repeat it per notice.
  const warnUnlessTokenRejected = (result: { error: DeliveryError }, message: string) => {
    if (!needsNoWarning(result.error)) log.warn(message);
  };

  /** Starts the durable write; resolves false (with a warning) when the outbox cannot take it. */
  const writeFinal = (event: EventBody): Promise<boolean> =>
    outbox.put(event, now()).then(
      () => true,
      (error: unknown) => {
        log.warn(t.finalNotWritten(event.event_id, outbox.dir, asDeliveryError(error).message));
        return false;
      },
    );

  /** Sends one outbox entry under a claim; `durable: false` when the outbox write itself failed. */
  const deliverFinal = async (event: EventBody, durable: boolean): Promise<RetryResult<EventAccepted> | undefined> => {
    if (durable && !(await outbox.claim(event.event_id, now()))) {
      log.debug?.(`final ${event.event_id} claimed elsewhere`);
      return undefined;
    }
    const result = await post(event);
    if (result.ok) {
      remember(event.event_id);
      // Only now: a crash before this line sends it again, which the server's idempotency absorbs.
      if (durable) await outbox.remove(event.event_id);
      log.debug?.(`final ${event.event_id} accepted: ${result.value.state}`);
    } else {
      if (durable) {
        await outbox.release(event.event_id);
        holdBack();
      }
      warnUnlessTokenRejected(result, (durable ? t.finalKept : t.finalLost)(event.event_id, result.attempts, result.error.message));
    }
    return result;
  };

  const holdBack = () => {
    heldBack = true;
    options.heldChanged?.();
    if (retryTimer || stop.signal.aborted) return;
    retryTimer = setTimeout(() => {
      retryTimer = undefined;
      if (heldBack) void resend();
    }, options.outboxRetryMs ?? OUTBOX_RETRY_MS);
    retryTimer.unref();
  };

  /**
   * Sends the outbox oldest first; `own` is the final whose job this is (queued, but due now).
   * Stops at the first retryable failure or refused token: the rest would fail the same way, and
   * must not overtake.
   */
  const drainOutbox = async (own?: string) => {
    const pruned = await outbox.prune(delivery.outboxMaxAgeMs, now());
    if (pruned.length > 0) {
      log.warn(t.expired(pruned.length, pruned.join(", ")));
    }
    heldBack = false;
    let resent = 0;
    try {
      for (const entry of await outbox.list()) {
        if (stop.signal.aborted) return;
        if (queued.has(entry.event.event_id) && entry.event.event_id !== own) continue;
        const result = await deliverFinal(entry.event, true);
        if (result?.ok && entry.event.event_id !== own) resent += 1;
        // Unreachable, busy or the token refused: the rest would fail the same way.
        if (result && !result.ok && (result.error.retryable || tokenRejected(result.error))) return;
      }
    } finally {
      // What went out after an outage is said once, with how many; the footer's count follows.
      if (resent > 0) log.info(t.resent(resent));
      options.heldChanged?.();
    }
  };

  const resend = () => enqueue(drainOutbox);

  const deliverNonFinal = async (event: EventBody) => {
    const result = await post(event);
    if (result.ok) remember(event.event_id);
    else warnUnlessTokenRejected(result, t.noticeFailed(event.event_id, event.status, result.attempts, result.error.message));
  };

  return {
    send(event, { final, throttled = true }) {
      try {
        const parsed = EventBody.safeParse(event);
        if (!parsed.success) {
          log.warn(t.invalidEvent(formatIssues(parsed.error)));
          return;
        }
        const valid = parsed.data;
        if (queued.has(valid.event_id) || accepted.has(valid.event_id)) {
          log.debug?.(`duplicate notice ${valid.event_id} ignored`);
          return;
        }
        if (!final && stop.signal.aborted) {
          log.debug?.(`notice ${valid.event_id} (${valid.status}) after close, skipped`);
          return;
        }
        if (!final && throttled) {
          if (!nonFinalAllowed(lastNonFinalAt, now(), delivery.minIntervalMs)) {
            log.debug?.(`notice ${valid.event_id} (${valid.status}) rate limited`);
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
              if (stop.signal.aborted) return;
              if (heldBack && durable) await drainOutbox(valid.event_id);
              else await deliverFinal(valid, durable);
            }
          } finally {
            queued.delete(valid.event_id);
          }
        });
      } catch (error) {
        log.warn(t.internalError(asDeliveryError(error).message));
      }
    },

    async flush(timeoutMs) {
      const timer = new AbortController();
      const drained = await Promise.race([tail.then(() => true), delay(timeoutMs, false, { signal: timer.signal, ref: false }).catch(() => false)]);
      timer.abort();
      return drained;
    },

    resendOutbox() {
      return resend();
    },

    serverAnswered() {
      if (heldBack) void resend();
    },

    async close() {
      stop.abort();
      clearTimeout(retryTimer);
      await tail;
    },
    lastDelivery: () => last,
  };
}
