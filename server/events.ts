/**
 * POST /events and GET /events/:event_id: validate, deduplicate by `event_id`, store the receipt,
 * and hand the event to the worker. A 202 is answered only after the row is in the database.
 */
import { createHash } from "node:crypto";
import type { Context } from "koishi";
import { EventBody, type EventAccepted, type Receipt } from "../protocol/events.ts";
import { Id, LIMITS, wireIssues } from "../protocol/wire.ts";
import { EventStore, declareEventTable, type EventRow } from "./event-store.ts";
import { EventWorker } from "./event-worker.ts";
import { HttpError, json, parseWith, type HttpApi, type RouteRequest } from "./http.ts";
import type { Config } from "./notify-webhook.ts";
import type { PersonaSlot } from "./persona/port.ts";
import type { AuditLog } from "./audit.ts";
import { fullBucket, takeToken } from "./rate-limit.ts";

const LOAD_RETRY_MS = 1000;

export interface EventsDeps {
  config: Config;
  api: HttpApi;
  personas: PersonaSlot;
  /** Server-side producers (the watchdog) submit here: same rate limit, store and worker as POST /events. */
  intake?: EventIntake;
  audit?: AuditLog;
}

/** The events' door for producers inside the server; closed (503) while the routes are not loaded. */
export class EventIntake {
  #submit: ((event: EventBody) => Promise<EventAccepted>) | undefined;

  attach(ctx: Context, submit: (event: EventBody) => Promise<EventAccepted>): void {
    this.#submit = submit;
    ctx.on("dispose", () => {
      if (this.#submit === submit) this.#submit = undefined;
    });
  }

  /** Throws the route's HttpError (429 rate_limited, 422 idempotency_key_reused) or 503 not_ready. */
  submit(event: EventBody): Promise<EventAccepted> {
    if (!this.#submit) return Promise.reject(new HttpError(503, "not_ready"));
    return this.#submit(event);
  }
}

export const EventRoutes = {
  name: "notify-webhook-events",
  reusable: true,
  apply(ctx: Context, { config, api, personas, intake, audit }: EventsDeps) {
    declareEventTable(ctx);
    const store = new EventStore(ctx);
    const worker = new EventWorker(ctx, store, personas, {
      maxAttempts: config.injectMaxAttempts,
      retryDelayMs: config.injectRetryDelayMs,
      personaWaitMs: config.personaWaitMs,
      botId: config.botId,
      recipientId: config.recipientId,
      audit,
    });
    const limit = { perMinute: config.eventsPerMinute, burst: config.eventBurst };
    let bucket = fullBucket(limit, Date.now());
    let lastSeq = 0;
    const inFlight = new Map<string, Promise<unknown>>();

    const release = api.holdUntilReady(ctx);
    const load = async () => {
      try {
        lastSeq = await store.lastSeq();
        const pending = await store.pending();
        for (const row of pending) worker.enqueue(row);
        if (pending.length > 0) ctx.logger("notify-webhook").info("resuming %d pending events", pending.length);
        release();
      } catch (error) {
        // Until the receipts can be read, every route keeps answering 503 rather than guessing.
        ctx.logger("notify-webhook").error("cannot load event receipts (%s); retrying", error instanceof Error ? error.message : String(error));
        ctx.setTimeout(load, LOAD_RETRY_MS);
      }
    };
    ctx.on("ready", load);
    api.offer(ctx, "events");
    api.offer(ctx, "direct");
    api.offer(ctx, "context_usage");

    function takeOrRefuse() {
      const take = takeToken(bucket, Date.now(), limit);
      bucket = take.bucket;
      if (!take.allowed) throw new HttpError(429, "rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
    }

    async function accept(request: RouteRequest) {
      takeOrRefuse();
      const event = parseEvent(request.body);
      const key = request.header("idempotency-key");
      if (key !== undefined && key !== event.event_id) {
        throw new HttpError(400, "invalid_request", { issues: [{ path: "Idempotency-Key", message: "must equal the body's event_id" }] });
      }
      return audit ? audit.as("agent", () => acceptInTurn(event)) : acceptInTurn(event);
    }

    intake?.attach(ctx, async (event) => {
      if (!api.ready) throw new HttpError(503, "not_ready");
      takeOrRefuse();
      return (await acceptInTurn(event)).body as EventAccepted;
    });

    async function acceptInTurn(event: EventBody) {
      // One request per event_id at a time, so a replay never races the first write.
      const previous = inFlight.get(event.event_id) ?? Promise.resolve();
      const current = previous.catch(() => undefined).then(() => acceptOnce(event));
      inFlight.set(event.event_id, current);
      try {
        return await current;
      } finally {
        if (inFlight.get(event.event_id) === current) inFlight.delete(event.event_id);
      }
    }

    async function acceptOnce(event: EventBody) {
      const hash = bodyHash(event);
      const existing = await store.get(event.event_id);
      if (existing) {
        if (existing.body_hash !== hash) throw new HttpError(422, "idempotency_key_reused");
        return json(202, { event_id: event.event_id, state: worker.overlay(existing).state, duplicate: true } satisfies EventAccepted);
      }
      const row = newEventRow(event, hash, ++lastSeq, new Date().toISOString());
      await store.create(row);
      // Queue before auditing: a stored row that is not queued would wait for the next restart.
      worker.enqueue(row);
      await audit?.record({ action: "event.accepted", session_id: event.session_id, subject: event.event_id, data: { event } });
      return json(202, { event_id: event.event_id, state: "queued", duplicate: false } satisfies EventAccepted);
    }

    api.route(ctx, { method: "POST", path: "/events", auth: "agent", maxBytes: LIMITS.eventBodyBytes }, accept);

    api.route(ctx, { method: "GET", path: "/events/:event_id", auth: "agent" }, async (request) => {
      const eventId = parseWith(Id, request.params.event_id);
      const row = await store.get(eventId);
      if (!row) throw new HttpError(404, "not_found");
      return json(200, receiptOf(worker.overlay(row)));
    });
  },
};

/** The body as the protocol reads it; any problem inside `context_usage` gets its own code. */
export function parseEvent(body: unknown): EventBody {
  const result = EventBody.safeParse(body);
  if (result.success) return result.data;
  const issues = wireIssues(result.error);
  const aboutContextUsage = result.error.issues.some((issue) => issue.path[0] === "context_usage");
  throw new HttpError(400, aboutContextUsage ? "invalid_context_usage" : "invalid_request", { issues });
}

/** The receipt row of a just-accepted event. */
export function newEventRow(event: EventBody, hash: string, seq: number, now: string): EventRow {
  return {
    event_id: event.event_id,
    session_id: event.session_id,
    status: event.status,
    delivery: event.delivery,
    body: JSON.stringify(event),
    body_hash: hash,
    seq,
    state: "queued",
    attempts: 0,
    error: null,
    message_id: null,
    created_at: event.created_at,
    received_at: now,
    updated_at: now,
  };
}

/** Replays compare the validated body, so key order and whitespace do not count as a change. */
export function bodyHash(event: EventBody): string {
  return createHash("sha256").update(canonicalJson(event)).digest("hex");
}

function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(",")}]`;
  if (value && typeof value === "object") {
    const entries = Object.entries(value)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

export function receiptOf(row: EventRow): Receipt {
  return {
    event_id: row.event_id,
    session_id: row.session_id,
    status: row.status,
    state: row.state,
    attempts: row.attempts,
    created_at: row.created_at,
    updated_at: row.updated_at,
    error: row.error,
    message_id: row.message_id,
  };
}
