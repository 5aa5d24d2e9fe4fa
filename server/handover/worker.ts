/** Moves each accepted event to the persona or the bot, one at a time per route, in acceptance order; the
 * row is the durable copy. Once taken, an event is never handed over again by this process. */
import type { Context } from "koishi";
import { backoffDelayMs } from "../../common/backoff.ts";
import { errorText } from "../../common/errors.ts";
import { kickLoop } from "../../common/kick-loop.ts";
import { EventBody, type DeliveryRoute } from "../../protocol/events.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventRow } from "../events/receipt-rules.ts";
import type { EventPatch, EventStore } from "../events/store.ts";
import { digestEvent, digestText, isUrgent, type UrgentKind } from "../mute/decisions.ts";
import type { MuteStore } from "../mute/store.ts";
import { buildEventBlock } from "../persona/block-rules.ts";
import type { Persona, PersonaSlot } from "../persona/port.ts";
import { instanceSay } from "../locales/load.ts";
import { formatDirectMessage, noticeButtons, sendDirectText, type DirectTarget } from "./direct.ts";
import { decideStep, deliveryError, errorInWords, type RetryPolicy, type WorkOutcome } from "./decisions.ts";

const SAVE_RETRY_FIRST_MS = 1000;

export interface WorkerOptions extends Omit<RetryPolicy, "say">, DirectTarget {
  personaWaitMs: number;
  /** Receives the exact text of every hand-over and its outcome. */
  audit?: AuditLog | undefined;
  /** While a notice's session is muted, non-urgent notices are held and later handed over as one digest. */
  mute?: { store: MuteStore; breakThrough: readonly UrgentKind[] } | undefined;
}

type LaneItem =
  | { kind: "event"; eventId: string }
  | { kind: "digest"; eventIds: string[]; done: () => void }
  /** Reached once every item queued before it has been handled. */
  | { kind: "barrier"; done: () => void };

export class EventWorker {
  readonly #ctx: Context;
  readonly #logger: ReturnType<Context["logger"]>;
  readonly #store: EventStore;
  readonly #personas: PersonaSlot;
  /** With `say`: every text the worker writes (direct notices, digests, receipt errors) is in the instance's language. */
  readonly #options: WorkerOptions & RetryPolicy;
  readonly #lanes: Record<DeliveryRoute, LaneItem[]> = { anon: [], direct: [] };
  /** Notices a mute holds (still `queued`), by event id, with their route and session. */
  readonly #held = new Map<string, { delivery: DeliveryRoute; sessionId: string }>();
  /** Outcomes already handed over whose save has not succeeded yet. */
  readonly #unsaved = new Map<string, EventPatch>();
  readonly #wakers = new Set<() => void>();

  readonly #startedAtMs = Date.now();
  #stopped = false;

  constructor(ctx: Context, store: EventStore, personas: PersonaSlot, options: WorkerOptions) {
    this.#ctx = ctx;
    this.#logger = ctx.logger("notify-webhook");
    this.#store = store;
    this.#personas = personas;
    this.#options = { ...options, say: instanceSay(ctx) };
    ctx.on("dispose", () => {
      this.#stopped = true;
      this.#wake();
    });
    ctx.effect(() => personas.onChange(() => this.#wake()));
    const mute = options.mute;
    if (mute) ctx.effect(() => mute.store.onEnd(() => this.#release()));
  }

  enqueue(row: Pick<EventRow, "event_id" | "delivery">): void {
    this.#lanes[row.delivery].push({ kind: "event", eventId: row.event_id });
    void this.#drains[row.delivery]();
  }

  get heldCount(): number {
    return this.#held.size;
  }

  /** The receipt as this process knows it: an outcome waiting for its save counts as settled. */
  overlay(row: EventRow): EventRow {
    const unsaved = this.#unsaved.get(row.event_id);
    return unsaved ? { ...row, ...unsaved } : row;
  }

  readonly #drains = { anon: this.#laneLoop("anon"), direct: this.#laneLoop("direct") };

  #laneLoop(lane: DeliveryRoute): () => void {
    // A pass that throws rejects, as an unguarded drain did.
    return kickLoop(
      () => this.#pass(lane),
      (error) => {
        throw error;
      },
    );
  }

  async #pass(lane: DeliveryRoute): Promise<void> {
    const queue = this.#lanes[lane];
    while (!this.#stopped && queue.length > 0) {
      const item = queue[0]!;
      if (item.kind === "event") await this.#work(lane, [item.eventId]);
      else if (item.kind === "digest") await this.#work(lane, item.eventIds, true).finally(item.done);
      else item.done();
      queue.shift();
    }
  }

  /** Hands one notice over, or (`digest`) the held notices still queued as one digest whose outcome each receipt takes. */
  async #work(lane: DeliveryRoute, eventIds: readonly string[], digest = false): Promise<void> {
    const say = this.#options.say;
    let attempts = 0;
    while (!this.#stopped) {
      try {
        const rows = (await Promise.all(eventIds.map((id) => this.#store.get(id)))).filter(
          (row): row is EventRow =>
            row !== undefined && !this.#unsaved.has(row.event_id) && (row.state === "queued" || (!digest && row.state === "processing")),
        );
        const events = rows.map((row) => EventBody.parse(JSON.parse(row.body)));
        if (rows.length === 0 || (!digest && (await this.#holds(rows[0]!, events[0]!)))) return;
        const persona = lane === "anon" ? await this.#awaitPersona() : undefined;
        if (this.#stopped) return;
        const [row] = rows as [EventRow];
        attempts = digest ? attempts + 1 : row.attempts + 1;
        if (!digest) await this.#store.update(row.event_id, { state: "processing", attempts });
        const event = digest ? digestEvent(events, lane, new Date(), say) : events[0]!;
        const sessionId = !digest ? row.session_id : new Set(events.map((e) => e.session_id)).size === 1 ? event.session_id : null;
        const directText = digest ? digestText(events, say) : formatDirectMessage(event, say);
        const text = lane === "direct" ? directText : buildEventBlock(event, digest ? event.created_at : row.received_at);
        const step = decideStep(await this.#attempt(event, text, sessionId, attempts, persona), attempts, this.#options);
        if (step.kind === "finish") {
          if (digest) this.#logger.debug("digest of %d held events %s", rows.length, step.state);
          else if (step.state === "failed")
            this.#logger.warn(say("anon-notify.event-failed", { id: row.event_id, reason: errorInWords(say, step.error ?? "") }));
          else this.#logger.debug("event %s %s", row.event_id, step.state);
          const patch = { state: step.state, error: step.error, message_id: step.messageId };
          for (const r of rows) this.#settle(r.event_id, digest ? { ...patch, attempts: r.attempts + 1 } : patch);
          return;
        }
        if (!digest) await this.#store.update(row.event_id, { error: step.error });
        await this.#sleep(step.delayMs);
      } catch (error) {
        // The database itself failed before anything was handed over: the rows are still pending.
        const key = digest ? "anon-notify.log.digest-store" : "anon-notify.log.store-unavailable";
        this.#logger.warn(say(key, { id: eventIds[0], error: errorText(error) }));
        await this.#sleep(this.#options.retryDelayMs);
      }
    }
  }

  /** One hand-over of `event` (a notice, or the digest of the notices a mute held) as `text`. */
  async #attempt(event: EventBody, text: string, sessionId: string | null, attempt: number, persona: Persona | undefined): Promise<WorkOutcome> {
    const direct = event.delivery === "direct";
    let outcome: WorkOutcome;
    try {
      if (direct) outcome = await sendDirectText(this.#ctx, this.#options, text, noticeButtons(this.#ctx, event, this.#options.say));
      else if (!persona) outcome = { kind: "error", retryable: false, error: deliveryError(this.#options.say, "no_persona") };
      else outcome = await persona.inject({ eventId: event.event_id, block: text, event, attempt });
    } catch (error) {
      outcome = { kind: "error", retryable: true, error: deliveryError(this.#options.say, "exception", errorText(error)) };
    }
    // Never rejects (AuditLog.record): a failed audit write cannot make the worker hand it over again.
    await this.#options.audit?.record({
      actor: "server",
      action: direct ? "event.sent_direct" : "event.handed_to_persona",
      session_id: sessionId,
      subject: event.event_id,
      data: { attempt, persona: persona?.name ?? null, outcome },
      verbatim: { text },
    });
    return outcome;
  }

  /** Whether a mute holds this notice now; a held one stays `queued` with no error until the mute ends. */
  async #holds(row: EventRow, event: EventBody): Promise<boolean> {
    const mute = this.#options.mute;
    if (!mute) return false;
    await mute.store.loaded;
    const covered = mute.store.all().some((m) => m.session_id === null || m.session_id === row.session_id);
    if (!covered || isUrgent(event, mute.breakThrough)) return false;
    if (row.state !== "queued" || row.error !== null) await this.#store.update(row.event_id, { state: "queued", error: null });
    if (!this.#held.has(row.event_id)) {
      // What became of the notice, for the owner's timeline: held, not lost.
      await this.#options.audit?.record({
        actor: "server",
        action: "event.held",
        session_id: row.session_id,
        subject: row.event_id,
        data: { status: event.status },
      });
    }
    this.#held.set(row.event_id, { delivery: row.delivery, sessionId: row.session_id });
    // Held under a mute that has already ended (found so at start, or ending right now): release it too.
    if (!mute.store.isMuted(row.session_id)) this.#release();
    return true;
  }

  /** After a mute ends, every held notice no running mute covers goes into one digest per route, in that route's lane; notices held meanwhile wait for
   * another round. */
  readonly #release = kickLoop(
    async () => {
      const store = this.#options.mute?.store;
      if (!store || this.#stopped) return;
      const endedBy = new Date();
      // Every notice already queued is looked at first (held or handed over), so none slips past the digest.
      await Promise.all((["anon", "direct"] as const).map((lane) => this.#push(lane, (done) => ({ kind: "barrier", done }))));
      if (this.#stopped) return;
      const free = [...this.#held].filter(([, held]) => !store.isMuted(held.sessionId));
      const jobs: Promise<void>[] = [];
      for (const lane of ["anon", "direct"] as const) {
        const eventIds = free.filter(([, held]) => held.delivery === lane).map(([id]) => id);
        if (eventIds.length === 0) continue;
        for (const id of eventIds) this.#held.delete(id);
        jobs.push(this.#push(lane, (done) => ({ kind: "digest", eventIds, done })));
      }
      await Promise.all(jobs);
      if (!this.#stopped) await store.forget(endedBy);
    },
    (error) => this.#logger.warn(this.#options.say("anon-notify.log.release-failed", { error: errorText(error) })),
  );

  #push(lane: DeliveryRoute, item: (done: () => void) => LaneItem): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((done) => {
      this.#lanes[lane].push(item(done));
      void this.#drains[lane]();
    });
  }

  /** The present persona, waiting up to `personaWaitMs` since start or since the last one left. */
  async #awaitPersona(): Promise<Persona | undefined> {
    for (;;) {
      const persona = this.#personas.current();
      if (persona || this.#stopped) return persona;
      const waitingSince = Math.max(this.#startedAtMs, this.#personas.lostAtMs);
      const remainingMs = waitingSince + this.#options.personaWaitMs - Date.now();
      if (remainingMs <= 0) return undefined;
      await this.#sleep(remainingMs);
    }
  }

  #settle(eventId: string, patch: EventPatch): void {
    this.#unsaved.set(eventId, patch);
    void this.#save(eventId, 1);
  }

  async #save(eventId: string, tries: number): Promise<void> {
    const patch = this.#unsaved.get(eventId);
    if (!patch || this.#stopped) return;
    try {
      await this.#store.update(eventId, patch);
      this.#unsaved.delete(eventId);
    } catch (error) {
      this.#logger.warn(this.#options.say("anon-notify.log.receipt-save", { id: eventId, error: errorText(error) }));
      const delayMs = backoffDelayMs(tries, Math.max(1, Math.min(this.#options.retryDelayMs, SAVE_RETRY_FIRST_MS)), Math.random);
      this.#ctx.setTimeout(() => void this.#save(eventId, tries + 1), delayMs);
    }
  }

  /** Waits `ms`, or less when a persona comes or goes or the plugin stops. */
  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const done = () => {
        this.#wakers.delete(done);
        cancel();
        resolve();
      };
      const cancel = this.#ctx.setTimeout(done, ms);
      this.#wakers.add(done);
    });
  }

  #wake(): void {
    for (const waker of [...this.#wakers]) waker();
  }
}
