/** One tick's acceptances stored in one transaction. Safe on minato's shared SQLite connection because the
 * transaction awaits only synchronous sql.js calls and never fails (a bad row fails alone, no ROLLBACK). */
import { TickBatch, type ItemOutcome } from "../../common/tick-batch.ts";
import type { AuditDraft, AuditLog } from "../audit/store.ts";
import type { EventRow } from "./receipt-rules.ts";
import type { EventStore } from "./store.ts";

type Receipt = { row: EventRow; audit: AuditDraft | undefined };

export class ReceiptBatch {
  readonly #tick = new TickBatch<Receipt, void>((receipts) => this.#write(receipts));

  readonly #store: EventStore;
  readonly #audit: AuditLog | undefined;

  constructor(store: EventStore, audit: AuditLog | undefined) {
    this.#store = store;
    this.#audit = audit;
  }

  /** Resolves once `row` and its audit row are stored (not yet synced); rejects if the row was not stored. */
  write(row: EventRow, audit?: AuditDraft): Promise<void> {
    return this.#tick.add({ row, audit });
  }

  /** Throws only when COMMIT itself fails: then nothing of the tick is known to be stored. */
  async #write(receipts: Receipt[]): Promise<ItemOutcome<void>[]> {
    const outcomes: ItemOutcome<void>[] = [];
    await this.#store.transaction(async (database) => {
      for (const receipt of receipts) {
        try {
          await this.#store.create(receipt.row, database);
        } catch (error) {
          outcomes.push({ ok: false, error });
          continue;
        }
        if (receipt.audit) await this.#audit?.write(receipt.audit, database);
        outcomes.push({ ok: true, value: undefined });
      }
    });
    return outcomes;
  }
}

/** The receipts asked for in one tick read together: one query for all of them. Building a minato
 * query costs more than running it (a third of an acceptance's CPU went to the per-event lookup). */
export class ReceiptLookup {
  readonly #tick: TickBatch<string, EventRow | undefined>;

  constructor(store: EventStore) {
    this.#tick = new TickBatch(async (eventIds) => {
      const byId = new Map((await store.many([...new Set(eventIds)])).map((row) => [row.event_id, row]));
      return eventIds.map((eventId) => ({ ok: true, value: byId.get(eventId) }));
    });
  }

  get(eventId: string): Promise<EventRow | undefined> {
    return this.#tick.add(eventId);
  }
}
