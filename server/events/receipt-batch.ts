/**
 * The acceptances of one tick stored together: every new receipt with its audit row in one
 * database transaction (the callers then share one sync, `DiskSync`). Before, each acceptance was
 * two single-row writes (two journal files created, written and deleted on SQLite) and the writes
 * dominated ingest; now a tick of acceptances costs one.
 *
 * One transaction on minato's SQLite driver, whose single connection every caller shares, is safe
 * here because of two things this class keeps true:
 * - the transaction only awaits database calls, and sql.js answers those synchronously, so COMMIT
 *   comes before any timer or I/O callback; another caller's statement that runs in between is
 *   committed with it, and nobody's sync (which waits for the next turn) can start before that COMMIT;
 * - it never fails: a row that cannot be written fails alone (SQLite undoes just that statement),
 *   so the driver never runs ROLLBACK, which would also undo those other callers' statements.
 * Server drivers (MySQL, PostgreSQL) give a transaction its own session anyway.
 */
import { setImmediate } from "node:timers/promises";
import type { AuditDraft, AuditLog } from "../audit/store.ts";
import type { EventRow } from "./receipt.ts";
import type { EventStore } from "./store.ts";

export interface ReceiptBatchDeps {
  store: EventStore;
  audit?: AuditLog | undefined;
  /** Told of each row once it is stored, in acceptance order. */
  stored: (row: EventRow) => void;
}

interface Pending {
  row: EventRow;
  audit: AuditDraft | undefined;
  settle: { resolve: () => void; reject: (error: unknown) => void };
}

export class ReceiptBatch {
  readonly #deps: ReceiptBatchDeps;
  #pending: Pending[] = [];

  constructor(deps: ReceiptBatchDeps) {
    this.#deps = deps;
  }

  /** Resolves once `row` and its audit row are stored (not yet synced); rejects if the row was not stored. */
  write(row: EventRow, audit?: AuditDraft): Promise<void> {
    return new Promise((resolve, reject) => {
      if (this.#pending.length === 0) void this.#afterTick();
      this.#pending.push({ row, audit, settle: { resolve, reject } });
    });
  }

  async #afterTick(): Promise<void> {
    // Every acceptance whose request was read in this turn of the event loop joins the batch.
    await setImmediate();
    const batch = this.#pending;
    this.#pending = [];
    const { store, audit, stored } = this.#deps;
    const failed = new Map<Pending, unknown>();
    try {
      await store.transaction(async (database) => {
        for (const item of batch) {
          try {
            await store.create(item.row, database);
          } catch (error) {
            failed.set(item, error);
            continue;
          }
          if (item.audit) await audit?.write(item.audit, database);
        }
      });
    } catch (error) {
      // Only COMMIT itself can fail here: nothing of the batch is known to be stored.
      for (const item of batch) failed.set(item, error);
    }
    for (const item of batch) {
      if (failed.has(item)) {
        item.settle.reject(failed.get(item));
      } else {
        // Queued as soon as stored: a stored row that is not queued would wait for the next restart.
        stored(item.row);
        item.settle.resolve();
      }
    }
  }
}

/**
 * The receipts asked for in one tick read together: one query for all of them. Building a minato
 * query costs more than running it (a third of an acceptance's CPU went to the per-event lookup).
 */
export class ReceiptLookup {
  readonly #store: EventStore;
  #pending = new Map<string, ((row: EventRow | undefined) => void)[]>();
  #failed: ((error: unknown) => void)[] = [];

  constructor(store: EventStore) {
    this.#store = store;
  }

  /** The stored receipt of `eventId`, or `undefined`. */
  get(eventId: string): Promise<EventRow | undefined> {
    return new Promise((resolve, reject) => {
      if (this.#pending.size === 0) void this.#afterTick();
      this.#pending.set(eventId, [...(this.#pending.get(eventId) ?? []), resolve]);
      this.#failed.push(reject);
    });
  }

  async #afterTick(): Promise<void> {
    await setImmediate();
    const pending = this.#pending;
    const failed = this.#failed;
    this.#pending = new Map();
    this.#failed = [];
    let rows: EventRow[];
    try {
      rows = await this.#store.many([...pending.keys()]);
    } catch (error) {
      for (const reject of failed) reject(error);
      return;
    }
    const byId = new Map(rows.map((row) => [row.event_id, row]));
    for (const [eventId, resolvers] of pending) for (const resolve of resolvers) resolve(byId.get(eventId));
  }
}
