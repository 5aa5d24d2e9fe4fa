/** Follows accepted notices' receipts (202 comes before the worker tries), so an undeliverable one is told
 * in Pi once per session. One receipt at a time, the newest accepted next: a burst shares one cause. */
import { errorText } from "../../common/errors.ts";
import { Receipt, type ReceiptState } from "../../protocol/events.ts";
import type { ApiClient } from "../server-client/http-client.ts";

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
  #timer: NodeJS.Timeout | undefined;
  /** The receipt being followed (a look pending or under way). */
  #following: string | undefined;
  /** The newest notice accepted while another was followed: followed next. */
  #newest: { eventId: string; acceptedAtMs: number } | undefined;
  /** A failure was told, or the watch closed: nothing more to follow. */
  #done = false;

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

  /** The server took `eventId` with `state`; follows it (or next) unless it is final or a failure was told already. */
  accepted(eventId: string, state: ReceiptState): void {
    if (this.#done || FINAL_RECEIPT_STATES.includes(state)) return;
    if (this.#following === undefined) this.#follow(eventId, 0, this.#looks[0]);
    else this.#newest = { eventId, acceptedAtMs: Date.now() };
  }

  close(): void {
    this.#done = true;
    clearTimeout(this.#timer);
    this.#following = this.#newest = undefined;
  }

  #follow(eventId: string, look: number, waitMs: number | undefined): void {
    if (waitMs === undefined) return this.#next();
    this.#following = eventId;
    this.#timer = setTimeout(() => void this.#look(eventId, look), waitMs).unref();
  }

  /** The followed receipt is settled (or given up on): the newest accepted meanwhile, if any, is next. */
  #next(): void {
    this.#following = undefined;
    const newest = this.#newest;
    this.#newest = undefined;
    if (!newest || this.#done) return;
    const firstLookMs = this.#looks[0];
    if (firstLookMs !== undefined) this.#follow(newest.eventId, 0, Math.max(0, newest.acceptedAtMs + firstLookMs - Date.now()));
  }

  async #look(eventId: string, look: number): Promise<void> {
    if (this.#done) return;
    let receipt: Receipt;
    try {
      receipt = await this.#client.request("GET", `events/${encodeURIComponent(eventId)}`, { schema: Receipt, timeoutMs: LOOK_TIMEOUT_MS });
    } catch (error) {
      this.#debug(`receipt of ${eventId} not read: ${errorText(error)}`);
      return this.#follow(eventId, look + 1, this.#looks[look + 1]);
    }
    if (this.#done) return;
    if (receipt.state === "failed") {
      this.#done = true;
      return this.#failed(eventId, receipt.error);
    }
    if (FINAL_RECEIPT_STATES.includes(receipt.state)) this.#next();
    else this.#follow(eventId, look + 1, this.#looks[look + 1]);
  }
}
