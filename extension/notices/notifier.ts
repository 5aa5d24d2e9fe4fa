/** What the handlers call: never throws, never waits. One request at a time carries every ready notice, in
 * hand-over order; a final notice is sent only after its outbox write and removed only once accepted. */
import { setTimeout as delay } from "node:timers/promises";
import { EventBody, type EventAccepted } from "../../protocol/events.ts";
import { formatIssues, LIMITS } from "../../protocol/wire.ts";
import type { Config } from "../config/schema-rules.ts";
import type { Messages } from "../texts/messages.ts";
import { batchSize, type EventOutcome, leading, type Outgoing, outgoing, takeChunk } from "./batch.ts";
import type { WebhookClient } from "../server-client/http-client.ts";
import type { Outbox } from "./outbox.ts";
import { asServerError, needsNoWarning, realSleep, retryDelayMs, type Sleep, tokenRejected } from "../server-client/retry.ts";

/** `final` (completed / failed): written to the outbox before it is sent, never rate limited. `throttled` (the default): a non-final notice shares
 * `delivery.minIntervalMs` with started, progress and tool_error; an explicit request does not. */
export type SendOptions = { final: boolean; throttled?: boolean };

export type LastDelivery = { eventId: string; status: EventBody["status"]; at: number } & (
  | { ok: true; state: EventAccepted["state"] }
  | { ok: false; attempts: number; error: string }
);

export interface NotifierOptions {
  client: Pick<WebhookClient, "postEvent" | "postEvents">;
  outbox: Outbox;
  delivery: Config["delivery"];
  log: { info(message: string): void; warn(message: string): void; debug?(message: string): void };
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
const ACCEPTED_MEMORY = 1000;

/** Progress-type notices are rate limited; finals and explicit requests never are, so a completion is not swallowed by a recent progress. */
export function nonFinalAllowed(lastNonFinalAt: number | undefined, now: number, minIntervalMs: number): boolean {
  return lastNonFinalAt === undefined || now - lastNonFinalAt >= minIntervalMs;
}

/** What waits in line: a notice, or a pass over the outbox (resend at start, after an outage). */
type Job = { kind: "notice"; notice: Outgoing; written?: Promise<boolean> } | { kind: "drain"; finished: () => void };

export class Notifier {
  readonly #options: NotifierOptions;
  readonly #now: () => number;
  readonly #stop = new AbortController();
  /** Everything handed over and not yet done with, in hand-over order; one pump works through it. */
  readonly #jobs: Job[] = [];
  #pumping: Promise<void> | undefined;
  /** Queued or in flight here, and recently accepted: an event_id in either is never sent again by this notifier. */
  readonly #queued = new Set<string>();
  readonly #accepted = new Set<string>();
  #lastNonFinalAt: number | undefined;
  /** While finals wait in the outbox, a new final goes through it behind them, so it never overtakes an older one. */
  #heldBack = false;
  #retryTimer: NodeJS.Timeout | undefined;
  #last: LastDelivery | undefined;
  /** Events per request the server said it takes (`batch_max` of its last single answer); one until it says. */
  #batchMax = 1;
  #paced = false;

  constructor(options: NotifierOptions) {
    this.#options = options;
    this.#now = options.now ?? Date.now;
  }

  /** Queues the event and returns at once; a final's outbox write starts now and its send waits for it. */
  send(event: EventBody, { final, throttled = true }: SendOptions): void {
    const { log, delivery, text: t } = this.#options;
    try {
      const parsed = EventBody.safeParse(event);
      if (!parsed.success) return log.warn(t.invalidEvent(formatIssues(parsed.error)));
      const valid = parsed.data;
      if (this.#queued.has(valid.event_id) || this.#accepted.has(valid.event_id)) return log.debug?.(`duplicate notice ${valid.event_id} ignored`);
      if (!final && this.#stop.signal.aborted) return log.debug?.(`notice ${valid.event_id} (${valid.status}) after close, skipped`);
      if (!final && throttled) {
        if (!nonFinalAllowed(this.#lastNonFinalAt, this.#now(), delivery.minIntervalMs))
          return log.debug?.(`notice ${valid.event_id} (${valid.status}) rate limited`);
        this.#lastNonFinalAt = this.#now();
      }
      const notice = outgoing(valid, final);
      this.#queued.add(valid.event_id);
      // Started here, beside the queue, so the outbox writes overlap the sends ahead of it.
      const written = final ? this.#writeFinal(notice) : undefined;
      this.#schedule(written ? { kind: "notice", notice, written } : { kind: "notice", notice });
    } catch (error) {
      log.warn(t.internalError(t.why(error)));
    }
  }

  /** Waits for queued and in-flight sends, at most timeoutMs; true when everything handed over so far was done with. */
  async flush(timeoutMs: number): Promise<boolean> {
    const timer = new AbortController();
    const idle = this.#pumping ?? Promise.resolve();
    const drained = await Promise.race([idle.then(() => true), delay(timeoutMs, false, { signal: timer.signal, ref: false }).catch(() => false)]);
    timer.abort();
    return drained;
  }

  /** Sends what the outbox holds, oldest first, after pruning old entries. Never rejects. */
  resendOutbox(): Promise<void> {
    return new Promise((finished) => this.#schedule({ kind: "drain", finished }));
  }

  /** The server answered another request (a heartbeat): finals held back by an outage are resent now. */
  serverAnswered(): void {
    if (this.#heldBack) void this.resendOutbox();
  }

  /** Aborts waits and requests in flight; unsent finals stay in the outbox for the next start. */
  async close(): Promise<void> {
    this.#stop.abort();
    clearTimeout(this.#retryTimer);
    await this.#pumping;
  }

  lastDelivery(): LastDelivery | undefined {
    return this.#last;
  }

  #schedule(job: Job): void {
    this.#jobs.push(job);
    this.#pumping ??= this.#pump();
  }

  async #pump(): Promise<void> {
    try {
      while (this.#jobs.length > 0) {
        try {
          await this.#next();
        } catch (error) {
          this.#options.log.warn(this.#options.text.internalError(this.#options.text.why(error)));
        }
      }
    } finally {
      // In the same step as the last look at the line: a job scheduled after it starts a new pump.
      this.#pumping = undefined;
      if (!this.#heldBack) this.#paced = false;
    }
  }

  /** Works off the head of the line: a pass over the outbox, or the notices waiting up to the next one. */
  async #next(): Promise<void> {
    const head = this.#jobs[0]!;
    if (head.kind === "drain") {
      this.#jobs.shift();
      return this.#drainOutbox().finally(head.finished);
    }
    // Sent only once on disk; notices handed over while those writes ran join them (up to one batch): their writes started together.
    const noticesFirst = () => leading(this.#jobs, (job) => job.kind === "notice") as Extract<Job, { kind: "notice" }>[];
    let waiting: Extract<Job, { kind: "notice" }>[] = [];
    while (waiting.length < LIMITS.eventBatchMax && noticesFirst().length > waiting.length) {
      waiting = noticesFirst();
      await Promise.all(waiting.map((job) => job.written));
    }
    this.#jobs.splice(0, waiting.length);
    const notices = waiting.map((job) => job.notice);
    if (this.#stop.signal.aborted) {
      // A closed notifier keeps its finals in the outbox for the next start.
      for (const { event } of notices) this.#queued.delete(event.event_id);
      return this.#options.log.debug?.(`${notices.length} notice(s) after close: finals kept in the outbox, others skipped`);
    }
    // Anything thrown on the way (the outbox failing) is warned about by the pump; what was taken is done with.
    let unsent: Outgoing[] = [];
    try {
      if (this.#heldBack && notices[0]!.durable) {
        // Behind finals held back: the outbox oldest first, these finals among them.
        const own = leading(notices, (notice) => notice.durable === true);
        unsent = notices.slice(own.length);
        await this.#drainOutbox(new Set(own.map((notice) => notice.event.event_id)));
      } else {
        const { rest, gaveUp } = await this.#sendInOrder(notices, (notice) => this.#heldBack && notice.durable === true);
        // After an outage began, the finals behind it wait in the outbox, free, for the next pass (heartbeat answered, timer, start).
        unsent = gaveUp ? rest.filter((notice) => !notice.durable) : rest;
        if (gaveUp) for (const notice of rest) if (notice.durable) await this.#options.outbox.release(notice.event.event_id);
      }
    } finally {
      for (const notice of notices) if (!unsent.includes(notice)) this.#queued.delete(notice.event.event_id);
      // What did not go yet (finals are held back now) waits at the head again, in order.
      this.#jobs.unshift(...unsent.map((notice): Job => ({ kind: "notice", notice })));
    }
  }

  /** Starts the durable write; resolves false (with a warning) when the outbox cannot take it. */
  #writeFinal(notice: Outgoing): Promise<boolean> {
    const { outbox, log, text: t } = this.#options;
    return outbox.put(notice.event, this.#now()).then(
      () => (notice.durable = true),
      (error: unknown) => {
        log.warn(t.finalNotWritten(notice.event.event_id, outbox.dir, t.why(error)));
        return (notice.durable = false);
      },
    );
  }

  /** Sends in order, in as few requests as the batch size allows, each retried from the first event not taken; outbox entries are claimed first. Stops at
   * `barrier` and after a failure the rest would share (`gaveUp`); resolves to what was not sent. */
  async #sendInOrder(notices: Outgoing[], barrier?: (notice: Outgoing) => boolean): Promise<{ rest: Outgoing[]; gaveUp: boolean }> {
    const { delivery, outbox, log } = this.#options;
    const rest: Outgoing[] = [];
    for (const notice of notices) {
      if (notice.durable && !(await outbox.claim(notice.event.event_id, this.#now()))) log.debug?.(`final ${notice.event.event_id} claimed elsewhere`);
      else rest.push(notice);
    }
    let attempts = 0;
    while (rest.length > 0 && !this.#stop.signal.aborted && !barrier?.(rest[0]!)) {
      const sizes = rest.map((notice) => ({ bytes: notice.bytes, barrier: barrier?.(notice) ?? false }));
      const chunk = rest.slice(0, takeChunk(sizes, this.#batchMax));
      attempts += 1;
      const outcomes = await this.#post(chunk);
      if (outcomes === undefined) {
        attempts -= 1; // a server without the batch route: the same notices again, one by one
        continue;
      }
      // Said once per episode; the pump ends it when the line drained with nothing held back.
      if (!this.#paced && outcomes.some((outcome) => !outcome.ok && outcome.error.status === 429)) {
        this.#paced = true;
        log.warn(this.#options.text.paced);
      }
      let retryInMs: number | undefined;
      for (const outcome of outcomes) {
        if (!outcome.ok && outcome.error.retryable && attempts < delivery.maxAttempts) {
          retryInMs = retryDelayMs(outcome.error, attempts, delivery.backoffMs, this.#options.random ?? Math.random);
          break;
        }
        await this.#finish(rest.shift()!, outcome, attempts);
        attempts = 0;
        if (!outcome.ok && (outcome.error.retryable || tokenRejected(outcome.error))) return { rest, gaveUp: true };
      }
      if (retryInMs === undefined) continue;
      try {
        await (this.#options.sleep ?? realSleep)(retryInMs, this.#stop.signal);
      } catch {
        break;
      }
    }
    return { rest, gaveUp: false };
  }

  /** One request for these notices; undefined when the server has no batch route (it forgets the batch size then). */
  async #post(chunk: Outgoing[]): Promise<EventOutcome[] | undefined> {
    const { client } = this.#options;
    const signal = this.#stop.signal;
    try {
      const events = chunk.map((notice) => notice.event);
      if (chunk.length > 1) return await client.postEvents(events, signal);
      const value = await client.postEvent(chunk[0]!.event, signal);
      this.#batchMax = batchSize(value.batch_max);
      return [{ ok: true, value }];
    } catch (thrown) {
      const error = asServerError(thrown);
      if (chunk.length > 1 && error.status === 404) {
        this.#batchMax = 1;
        return undefined;
      }
      return [{ ok: false, error }];
    }
  }

  /** What one notice's outcome means: removed from the outbox once accepted, or kept (held back) and told. */
  async #finish(notice: Outgoing, outcome: EventOutcome, attempts: number): Promise<void> {
    const { outbox, log, text: t } = this.#options;
    const { event_id: eventId, status } = notice.event;
    const done = { eventId, status, at: this.#now() };
    if (outcome.ok) {
      this.#last = { ...done, ok: true, state: outcome.value.state };
      notice.accepted = true;
      this.#options.accepted?.(eventId, outcome.value.state);
      this.#accepted.add(eventId);
      if (this.#accepted.size > ACCEPTED_MEMORY) this.#accepted.delete(this.#accepted.values().next().value!);
      // Only now: a crash before this line sends it again, which the server's idempotency absorbs.
      if (notice.durable) await outbox.remove(eventId);
      log.debug?.(`notice ${eventId} accepted: ${outcome.value.state}`);
      return;
    }
    const { error } = outcome;
    this.#last = { ...done, ok: false, attempts, error: t.why(error) };
    if (notice.durable) {
      await outbox.release(eventId);
      this.#heldBack = true;
      this.#options.heldChanged?.();
      if (!this.#retryTimer && !this.#stop.signal.aborted) {
        this.#retryTimer = setTimeout(() => {
          this.#retryTimer = undefined;
          if (this.#heldBack) void this.resendOutbox();
        }, this.#options.outboxRetryMs ?? OUTBOX_RETRY_MS).unref();
      }
    }
    // A refused token is told once by the client, pacing once per episode; these warnings would only repeat it per notice.
    if (needsNoWarning(error) || (error.status === 429 && notice.durable !== false)) return;
    if (!notice.final) log.warn(t.noticeFailed(eventId, status, attempts, t.why(error)));
    else log.warn((notice.durable ? t.finalKept : t.finalLost)(eventId, attempts, t.why(error)));
  }

  /** Sends the outbox oldest first (`own`: the finals whose turn this is); stops at a retryable failure or refused token the rest would share. */
  async #drainOutbox(own: ReadonlySet<string> = new Set()): Promise<void> {
    const { outbox, delivery, log, text: t } = this.#options;
    const pruned = await outbox.prune(delivery.outboxMaxAgeMs, this.#now());
    if (pruned.length > 0) log.warn(t.expired(pruned.length, pruned.join(", ")));
    this.#heldBack = false;
    let resent = 0;
    try {
      // Finals still queued here wait for their own turn.
      const entries = (await outbox.list()).filter((entry) => own.has(entry.event.event_id) || !this.#queued.has(entry.event.event_id));
      const notices = entries.map((entry) => ({ ...outgoing(entry.event, true), durable: true }));
      const { rest } = await this.#sendInOrder(notices);
      // Claimed for this pass but not sent: free again for a later pass or process.
      for (const notice of rest) await outbox.release(notice.event.event_id);
      resent = notices.filter((notice) => notice.accepted && !own.has(notice.event.event_id)).length;
    } finally {
      // What went out after an outage is said once, with how many; the footer's count follows.
      if (resent > 0) log.info(t.resent(resent));
      this.#options.heldChanged?.();
    }
  }
}
