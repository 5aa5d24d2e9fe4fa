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
import { TickBatch, type ItemOutcome } from "../../common/tick-batch.ts";
import type { AuditDraft, AuditLog } from "../audit/store.ts";
import type { EventRow } from "./receipt-rules.ts";
import type { EventStore } from "./store.ts";

export interface ReceiptBatchDeps {
  store: EventStore;
  audit?: AuditLog | undefined;
}

interface Receipt {
  row: EventRow;
  audit: AuditDraft | undefined;
}

export class ReceiptBatch {
  readonly #deps: ReceiptBatchDeps;
  readonly #tick = new TickBatch<Receipt, void>((receipts) => this.#store(receipts));

  constructor(deps: ReceiptBatchDeps) {
    this.#deps = deps;
  }

  /** Resolves once `row` and its audit row are stored (not yet synced); rejects if the row was not stored. */
  write(row: EventRow, audit?: AuditDraft): Promise<void> {
    return this.#tick.add({ row, audit });
  }

  /** Throws only when COMMIT itself fails: then nothing of the tick is known to be stored. */
  async #store(receipts: Receipt[]): Promise<ItemOutcome<void>[]> {
    const { store, audit } = this.#deps;
    const outcomes: ItemOutcome<void>[] = [];
    await store.transaction(async (database) => {
      for (const receipt of receipts) {
        try {
          await store.create(receipt.row, database);
        } catch (error) {
          outcomes.push({ ok: false, error });
          continue;
        }
        if (receipt.audit) await audit?.write(receipt.audit, database);
        outcomes.push({ ok: true, value: undefined });
      }
    });
    return outcomes;
  }
}

/**
 * The receipts asked for in one tick read together: one query for all of them. Building a minato
 * query costs more than running it (a third of an acceptance's CPU went to the per-event lookup).
 */
export class ReceiptLookup {
  readonly #tick: TickBatch<string, EventRow | undefined>;

  constructor(store: EventStore) {
    this.#tick = new TickBatch(async (eventIds) => {
      const byId = new Map((await store.many([...new Set(eventIds)])).map((row) => [row.event_id, row]));
      return eventIds.map((eventId) => ({ ok: true, value: byId.get(eventId) }));
    });
  }

  /** The stored receipt of `eventId`, or `undefined`. */
  get(eventId: string): Promise<EventRow | undefined> {
    return this.#tick.add(eventId);
  }
}
