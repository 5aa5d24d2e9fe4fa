/** What callers ask for within one turn of the event loop, handled as one query or write; each caller gets its own item's outcome. */
import { setImmediate } from "node:timers/promises";

export type ItemOutcome<Result> = { ok: true; value: Result } | { ok: false; error: unknown };

type Waiting<Item, Result> = { item: Item; resolve: (value: Result) => void; reject: (error: unknown) => void };

export class TickBatch<Item, Result> {
  readonly #handle: (items: Item[]) => Promise<ItemOutcome<Result>[]>;
  #waiting: Waiting<Item, Result>[] = [];

  /** `handle` answers the items of one tick in their order; if it throws, every item of the tick fails with that error. */
  constructor(handle: (items: Item[]) => Promise<ItemOutcome<Result>[]>) {
    this.#handle = handle;
  }

  add(item: Item): Promise<Result> {
    return new Promise((resolve, reject) => {
      if (this.#waiting.length === 0) void this.#afterTick();
      this.#waiting.push({ item, resolve, reject });
    });
  }

  async #afterTick(): Promise<void> {
    // Everything asked for in this turn of the event loop joins.
    await setImmediate();
    const batch = this.#waiting;
    this.#waiting = [];
    let outcomes: ItemOutcome<Result>[];
    try {
      outcomes = await this.#handle(batch.map((waiting) => waiting.item));
    } catch (error) {
      for (const waiting of batch) waiting.reject(error);
      return;
    }
    batch.forEach((waiting, i) => {
      const outcome = outcomes[i]!;
      if (outcome.ok) waiting.resolve(outcome.value);
      else waiting.reject(outcome.error);
    });
  }
}
