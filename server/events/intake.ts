/** The one way events enter the server (POST /events and the watchdog): rate limit, validation, one request
 * per `event_id` at a time, dedupe by body, the receipt synced to disk before any answer, then the worker. */
import type { AuditActor } from "../../protocol/audit.ts";
import { SERVER_EVENT_ID_PREFIXES, isServerEventId, type EventAccepted, type EventBody, type Receipt } from "../../protocol/events.ts";
import type { SessionRegistry } from "../sessions/registry.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventWorker } from "../handover/worker.ts";
import { DomainError } from "../../common/domain-error.ts";
import { SessionBuckets, type RateLimit } from "../rate-limit-rules.ts";
import { Turns } from "../../common/turns.ts";
import { bodyHash, newEventRow, parseEvent, receiptOf, type EventRow } from "./receipt-rules.ts";
import { ReceiptBatch, ReceiptLookup } from "./receipt-batch.ts";
import type { EventStore } from "./store.ts";

export interface EventIntakeDeps {
  store: EventStore;
  worker: Pick<EventWorker, "enqueue" | "overlay">;
  /** Events of one session, and likewise of one runtime: one session's flood never holds back another's final. */
  limit: RateLimit;
  /** Events of every session together: a ceiling far above normal use (`eventCeiling`). */
  totalLimit: RateLimit;
  audit?: AuditLog | undefined;
  /** Names each accepted event's project on the audit trail: the timeline names a gone session by it. */
  registry?: Pick<SessionRegistry, "projectOf"> | undefined;
  /** Resolves once what was written is on disk (`DiskSync.flush`): a 202 is answered only then. */
  sync?: (() => Promise<void>) | undefined;
}

/** `actor`: who submits, the acting side of the audit rows written while accepting; `idempotencyKey`: the HTTP `Idempotency-Key`, which must equal
 * the body's `event_id` when given. */
export type Submission = { actor: AuditActor; idempotencyKey?: string | undefined };

type Lookup = (eventId: string) => Promise<EventRow | undefined>;

/** An answer, and the new receipt it stored (none for a replay), for the worker once synced. */
type Stored = { accepted: EventAccepted; row: EventRow | undefined };

export const eventCeiling = (limit: RateLimit): RateLimit => ({ perMinute: limit.perMinute * 20, burst: limit.burst * 10 });

export class EventIntake {
  readonly #deps: EventIntakeDeps;
  readonly #buckets: SessionBuckets;
  /** Sessions refused since their bucket was last full (`prune` forgets them then): a burst is told once. */
  readonly #limited = new Set<string>();
  #lastSeq = 0;
  #loaded = false;
  readonly #turns = new Turns();
  readonly #batch: ReceiptBatch;
  readonly #lookup: ReceiptLookup;
  /** Told once per burst when a session's events start being refused (the edge logs it). */
  onLimited: ((sessionId: string, limit: RateLimit) => void) | undefined;

  constructor(deps: EventIntakeDeps) {
    this.#deps = deps;
    this.#lookup = new ReceiptLookup(deps.store);
    this.#batch = new ReceiptBatch(deps.store, deps.audit);
    this.#buckets = new SessionBuckets(deps.limit, deps.totalLimit, Date.now());
  }

  /** Reads the receipts and hands pending events back to the worker; until then every submission is refused `not_ready`. */
  async load(): Promise<number> {
    const { store, worker } = this.#deps;
    this.#lastSeq = await store.lastSeq();
    const pending = await store.pending();
    for (const row of pending) worker.enqueue(row);
    this.#loaded = true;
    return pending.length;
  }

  /** Accepts one event body; a replay of the same body answers `duplicate: true`. */
  async submit(body: unknown, from: Submission): Promise<EventAccepted> {
    if (!this.#loaded) throw new DomainError("not_ready");
    // Looked up with the other submissions of this tick: one query for all.
    const { accepted, row } = await this.#as(from, () => this.#accept(body, from, (eventId) => this.#lookup.get(eventId)).stored);
    await this.#syncThenHandOver(row ? [row] : []);
    return accepted;
  }

  /** Accepts bodies in order as `submit` would and stops at the first refusal, so what was accepted is a prefix and no later event overtakes an earlier
   * one; their rows are written together (one transaction, one sync). A store failure rejects the whole call. */
  async submitBatch(bodies: readonly unknown[], from: Submission): Promise<{ accepted: EventAccepted[]; refused?: { index: number; error: DomainError } }> {
    if (!this.#loaded) throw new DomainError("not_ready");
    const accepted: EventAccepted[] = [];
    const stored: Promise<Stored>[] = [];
    const lookup = await this.#batchLookup(bodies);
    const refused = await this.#as(from, async () => {
      for (const [index, body] of bodies.entries()) {
        try {
          // Decided one by one from rows read up front: no query between two events, so on any
          // driver (MySQL's round trips too) the whole prefix joins one tick's write.
          const acceptance = this.#accept(body, from, lookup);
          stored.push(acceptance.stored);
          accepted.push(await acceptance.decided);
        } catch (error) {
          if (error instanceof DomainError) return { index, error };
          throw error;
        }
      }
      return undefined;
    });
    const results = await Promise.allSettled(stored);
    // A row stored goes to the worker even if another of the batch was not (it is stored all the same).
    const rows = results.flatMap((result) => (result.status === "fulfilled" && result.value.row ? [result.value.row] : []));
    const synced = accepted.length > 0 ? this.#syncThenHandOver(rows) : Promise.resolve();
    // Every accepted row must be stored; the refused one's rejection is the refusal above.
    const failed = results.slice(0, accepted.length).find((result) => result.status === "rejected");
    if (failed) {
      await synced.catch(() => undefined);
      throw failed.reason;
    }
    await synced;
    return refused ? { accepted, refused } : { accepted };
  }

  /** One query for every id the batch names; an id met twice is read again after its first acceptance was stored, so it is a replay. */
  async #batchLookup(bodies: readonly unknown[]): Promise<Lookup> {
    const unique = [...new Set(bodies.map((body) => (body as { event_id?: unknown } | null)?.event_id).filter((id) => typeof id === "string"))];
    // Through the tick's lookup: one query with the single submissions of this tick, answered after theirs.
    const rows = await Promise.all(unique.map((id) => this.#lookup.get(id)));
    const known = new Map(unique.map((id, index) => [id, rows[index]]));
    const seen = new Set<string>();
    return async (eventId) => {
      if (seen.has(eventId)) return this.#deps.store.get(eventId);
      seen.add(eventId);
      return known.get(eventId);
    };
  }

  async receipt(eventId: string): Promise<Receipt> {
    const row = await this.#deps.store.get(eventId);
    if (!row) throw new DomainError("not_found");
    return receiptOf(this.#deps.worker.overlay(row));
  }

  /** One token from the event's session, its runtime (when it names one) and the ceiling, or none (a refused event uses up nothing). */
  #takeToken(event: EventBody): void {
    const take = this.#buckets.take(event.session_id, event.runtime_id, Date.now());
    if (take.allowed) return;
    if (!this.#limited.has(event.session_id)) {
      this.#limited.add(event.session_id);
      this.onLimited?.(event.session_id, this.#deps.limit);
    }
    throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
  }

  prune(): void {
    this.#buckets.prune(Date.now());
    for (const sessionId of this.#limited) if (!this.#buckets.hasSession(sessionId)) this.#limited.delete(sessionId);
  }

  /** Hands `rows` to the worker once synced, in acceptance order and after this turn's answers; also when the sync failed, since the rows are stored. */
  async #syncThenHandOver(rows: EventRow[]): Promise<void> {
    try {
      await this.#deps.sync?.();
    } finally {
      if (rows.length > 0)
        setImmediate(() => {
          for (const row of rows) this.#deps.worker.enqueue(row);
        });
    }
  }

  #as<T>(from: Submission, task: () => Promise<T>): Promise<T> {
    const { audit } = this.#deps;
    return audit ? audit.as(from.actor, task) : task();
  }

  /** Checks one body and stores it (not yet synced): `decided` once its answer is known, `stored` once written. One request per event_id at a time, so a
   * replay never races the first write. */
  #accept(body: unknown, from: Submission, lookup: Lookup): { decided: Promise<EventAccepted>; stored: Promise<Stored> } {
    // Validated first (a bad body costs nothing), then limited by the session it names.
    const event = parseEvent(body);
    this.#takeToken(event);
    if (from.idempotencyKey !== undefined && from.idempotencyKey !== event.event_id) {
      throw new DomainError("invalid_request", { issues: [{ path: "Idempotency-Key", message: "must equal the body's event_id" }] });
    }
    if (from.actor === "agent" && isServerEventId(event.event_id)) {
      throw new DomainError("invalid_request", {
        issues: [{ path: "event_id", message: `must not start with ${SERVER_EVENT_ID_PREFIXES.join(" / ")} (the server's own notices)` }],
      });
    }
    let decide!: { resolve: (accepted: EventAccepted) => void; reject: (error: unknown) => void };
    const decided = new Promise<EventAccepted>((resolve, reject) => (decide = { resolve, reject }));
    const stored = this.#turns.run(event.event_id, async () => {
      try {
        const { accepted, written, row } = await this.#decide(event, lookup);
        decide.resolve(accepted);
        await written;
        return { accepted, row };
      } catch (error) {
        decide.reject(error);
        throw error;
      }
    });
    // A refusal reaches whoever awaits `stored` (a single submission); `decided` must not report it again.
    decided.catch(() => undefined);
    return { decided, stored };
  }

  async #decide(event: EventBody, lookup: Lookup): Promise<Stored & { written: Promise<void> }> {
    const { worker, audit } = this.#deps;
    const hash = bodyHash(event);
    const existing = await lookup(event.event_id);
    if (existing) {
      if (existing.body_hash !== hash) throw new DomainError("idempotency_key_reused");
      // The first answer may have failed at its sync: the caller's sync covers a replay too.
      return { accepted: { event_id: event.event_id, state: worker.overlay(existing).state, duplicate: true }, written: Promise.resolve(), row: undefined };
    }
    const row = newEventRow(event, hash, ++this.#lastSeq, new Date().toISOString());
    // Stored with the other acceptances of this tick, each with its audit row: one transaction for all.
    const written = this.#batch.write(
      row,
      audit?.draft({
        action: "event.accepted",
        session_id: event.session_id,
        subject: event.event_id,
        data: { event, project: this.#deps.registry?.projectOf(event.session_id) ?? null },
      }),
    );
    return { accepted: { event_id: event.event_id, state: "queued", duplicate: false }, written, row };
  }
}
