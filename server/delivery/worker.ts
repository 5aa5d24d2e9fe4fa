/**
 * Moves each accepted event `queued → processing → context_injected | delivered | failed`, one at a
 * time per delivery route, in acceptance order. The database row is the durable copy: a busy
 * persona or an offline bot only delays the event (within `injectMaxAttempts`), and a restart
 * resumes whatever is still queued or processing.
 *
 * Once the persona or the bot has taken an event, it is never handed over again by this process:
 * if saving that outcome fails, only the save is retried, in the background, and the next event
 * goes ahead. A crash between the hand-over and the save is the one duplicate window: the row is
 * still `processing` and the restarted worker hands it over again.
 */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { EventBody, type DeliveryRoute } from "../../protocol/events.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventPatch, EventRow, EventStore } from "../events/store.ts";
import { buildEventBlock } from "../persona/block.ts";
import type { Persona, PersonaSlot } from "../persona/port.ts";
import { deliverDirect, formatDirectMessage, type DirectTarget } from "./direct.ts";
import { decideStep, type RetryPolicy, type WorkOutcome } from "./steps.ts";

export const NO_PERSONA_ERROR = "no_persona: 没有可用的人格（未检测到 YesImBot v3，也未启用日志人格），事件未注入";

const SAVE_RETRY_FIRST_MS = 1000;
const SAVE_RETRY_MAX_MS = 30_000;

export interface WorkerOptions extends RetryPolicy, DirectTarget {
  personaWaitMs: number;
  /** Receives the exact text of every hand-over and its outcome. */
  audit?: AuditLog | undefined;
}

export class EventWorker {
  readonly #ctx: Context;
  readonly #store: EventStore;
  readonly #personas: PersonaSlot;
  readonly #options: WorkerOptions;
  readonly #lanes: Record<DeliveryRoute, string[]> = { anon: [], direct: [] };
  readonly #running: Record<DeliveryRoute, boolean> = { anon: false, direct: false };
  /** Outcomes already handed over whose save has not succeeded yet. */
  readonly #unsaved = new Map<string, EventPatch>();
  readonly #wakers = new Set<() => void>();
  readonly #startedAtMs = Date.now();
  #stopped = false;

  constructor(ctx: Context, store: EventStore, personas: PersonaSlot, options: WorkerOptions) {
    this.#ctx = ctx;
    this.#store = store;
    this.#personas = personas;
    this.#options = options;
    ctx.on("dispose", () => {
      this.#stopped = true;
      this.#wake();
    });
    ctx.effect(() => personas.onChange(() => this.#wake()));
  }

  enqueue(row: Pick<EventRow, "event_id" | "delivery">): void {
    this.#lanes[row.delivery].push(row.event_id);
    void this.#drain(row.delivery);
  }

  /** The receipt as this process knows it: an outcome waiting for its save counts as settled. */
  overlay(row: EventRow): EventRow {
    const unsaved = this.#unsaved.get(row.event_id);
    return unsaved ? { ...row, ...unsaved } : row;
  }

  async #drain(lane: DeliveryRoute): Promise<void> {
    if (this.#running[lane]) return;
    this.#running[lane] = true;
    try {
      const queue = this.#lanes[lane];
      while (!this.#stopped && queue.length > 0) {
        await this.#work(queue[0]!);
        queue.shift();
      }
    } finally {
      this.#running[lane] = false;
    }
  }

  async #work(eventId: string): Promise<void> {
    const logger = this.#ctx.logger("notify-webhook");
    while (!this.#stopped && !this.#unsaved.has(eventId)) {
      try {
        const row = await this.#store.get(eventId);
        if (!row || (row.state !== "queued" && row.state !== "processing")) return;
        const persona = row.delivery === "anon" ? await this.#awaitPersona() : undefined;
        if (this.#stopped) return;
        const attempts = row.attempts + 1;
        await this.#store.update(eventId, { state: "processing", attempts });
        const step = decideStep(await this.#attempt(row, attempts, persona), attempts, this.#options);
        if (step.kind === "finish") {
          if (step.state === "failed") logger.warn("event %s failed: %s", eventId, step.error);
          else logger.debug("event %s %s", eventId, step.state);
          this.#settle(eventId, { state: step.state, error: step.error, message_id: step.messageId });
          return;
        }
        await this.#store.update(eventId, { error: step.error });
        await this.#sleep(step.delayMs);
      } catch (error) {
        // The database itself failed before anything was handed over: the row is still pending.
        logger.warn("event %s: store unavailable (%s), retrying", eventId, errorText(error));
        await this.#sleep(this.#options.retryDelayMs);
      }
    }
  }

  async #attempt(row: EventRow, attempt: number, persona: Persona | undefined): Promise<WorkOutcome> {
    const event = EventBody.parse(JSON.parse(row.body));
    const direct = row.delivery === "direct";
    const text = direct ? formatDirectMessage(event) : buildEventBlock(event, row.received_at);
    let outcome: WorkOutcome;
    try {
      if (direct) outcome = await deliverDirect(this.#ctx, this.#options, event);
      else if (!persona) outcome = { kind: "error", retryable: false, error: NO_PERSONA_ERROR };
      else outcome = await persona.inject({ eventId: row.event_id, block: text, event, attempt });
    } catch (error) {
      outcome = { kind: "error", retryable: true, error: `exception: ${errorText(error)}` };
    }
    try {
      await this.#options.audit?.record({
        actor: "server",
        action: direct ? "event.sent_direct" : "event.handed_to_persona",
        session_id: row.session_id,
        subject: row.event_id,
        data: { attempt, persona: persona?.name ?? null, outcome },
        verbatim: { text },
      });
    } catch (error) {
      // The hand-over has happened either way; a failed audit write must not make the worker hand it over again.
      this.#ctx.logger("notify-webhook").error("event %s: audit record failed (%s)", row.event_id, errorText(error));
    }
    return outcome;
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
    void this.#save(eventId, Math.min(this.#options.retryDelayMs, SAVE_RETRY_FIRST_MS));
  }

  async #save(eventId: string, nextDelayMs: number): Promise<void> {
    const patch = this.#unsaved.get(eventId);
    if (!patch || this.#stopped) return;
    try {
      await this.#store.update(eventId, patch);
      this.#unsaved.delete(eventId);
    } catch (error) {
      this.#ctx.logger("notify-webhook").warn("event %s: saving the receipt failed (%s), retrying the save only", eventId, errorText(error));
      this.#ctx.setTimeout(() => void this.#save(eventId, Math.min(Math.max(1, nextDelayMs) * 2, SAVE_RETRY_MAX_MS)), nextDelayMs);
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
