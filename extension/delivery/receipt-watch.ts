/**
 * Follows the receipts of accepted notices for a while, so a notice the server took but cannot
 * deliver (no persona, no bot) is told in Pi: once per session, for the first such receipt. A
 * server that took a notice answers 202 before its worker tries it, so only a later look sees
 * the failure. Background only: nothing waits on it.
 */
import { errorText } from "../../common/errors.ts";
import { Receipt, type ReceiptState } from "../../protocol/events.ts";
import type { ApiClient } from "./http-client.ts";

/** A receipt state nothing will change any more. */
export const FINAL_RECEIPT_STATES: readonly ReceiptState[] = ["context_injected", "delivered", "failed"];

/** When to look again after an acceptance still in progress (ms after the previous look); then give up. */
export const RECEIPT_LOOKS_MS: readonly number[] = [1_000, 3_000, 10_000];
const LOOK_TIMEOUT_MS = 5_000;

export class ReceiptWatch {
  readonly #client: ApiClient;
  readonly #failed: (eventId: string, error: string | null) => void;
  readonly #looks: readonly number[];
  readonly #debug: (message: string) => void;
  readonly #timers = new Set<NodeJS.Timeout>();
  #told = false;
  #closed = false;

  /** `failed` hears the first receipt that ended failed; `debug` why a look did not answer. */
  constructor(
    client: ApiClient,
    failed: (eventId: string, error: string | null) => void,
    options: { looks?: readonly number[]; debug?: (message: string) => void } = {},
  ) {
    this.#client = client;
    this.#failed = failed;
    this.#looks = options.looks ?? RECEIPT_LOOKS_MS;
    this.#debug = options.debug ?? (() => {});
  }

  /** The server took `eventId` with `state`; follows it unless it is final or a failure was told already. */
  accepted(eventId: string, state: ReceiptState): void {
    if (this.#told || this.#closed || FINAL_RECEIPT_STATES.includes(state)) return;
    this.#lookAfter(eventId, 0);
  }

  close(): void {
    this.#closed = true;
    for (const timer of this.#timers) clearTimeout(timer);
    this.#timers.clear();
  }

  #lookAfter(eventId: string, look: number): void {
    const wait = this.#looks[look];
    if (wait === undefined) return;
    const timer = setTimeout(() => {
      this.#timers.delete(timer);
      void this.#look(eventId, look);
    }, wait);
    timer.unref();
    this.#timers.add(timer);
  }

  async #look(eventId: string, look: number): Promise<void> {
    if (this.#told || this.#closed) return;
    let receipt: Receipt;
    try {
      receipt = await this.#client.request("GET", `events/${encodeURIComponent(eventId)}`, { schema: Receipt, timeoutMs: LOOK_TIMEOUT_MS });
    } catch (error) {
      this.#debug(`receipt of ${eventId} not read: ${errorText(error)}`);
      return this.#lookAfter(eventId, look + 1);
    }
    if (receipt.state === "failed") {
      if (this.#told || this.#closed) return;
      this.#told = true;
      return this.#failed(eventId, receipt.error);
    }
    if (!FINAL_RECEIPT_STATES.includes(receipt.state)) this.#lookAfter(eventId, look + 1);
  }
}
