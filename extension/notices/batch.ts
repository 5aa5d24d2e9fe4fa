/** How many waiting notices go in the next request, and what a `POST /events/batch` answer says of each. */
import type { BatchAccepted, EventAccepted, EventBody } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { classifyHttpFailure, ServerError } from "../server-client/retry.ts";

/** The server took the event but knows it cannot deliver it: not a success, and a resend only returns the same receipt. */
export const receiptFailed = () => new ServerError("receipt state failed", { retryable: false, code: "receipt_failed", facts: { kind: "receipt_failed" } });

export type EventOutcome = { ok: true; value: EventAccepted } | { ok: false; error: ServerError };

/** One notice on its way: handed over by `send`, or read back from the outbox. */
export interface Outgoing {
  readonly event: EventBody;
  readonly final: boolean;
  readonly bytes: number;
  /** Finals: on disk in the outbox (undefined while the write runs; false when it failed: sent anyway, kept nowhere). */
  durable?: boolean;
  accepted?: boolean;
}

export const outgoing = (event: EventBody, final: boolean): Outgoing => ({ event, final, bytes: Buffer.byteLength(JSON.stringify(event)) });

export function leading<T>(list: readonly T[], keep: (item: T) => boolean): T[] {
  const end = list.findIndex((item) => !keep(item));
  return end < 0 ? [...list] : list.slice(0, end);
}

// `{"events":[` … `]}` and the commas between elements.
const ENVELOPE_BYTES = 16;

/** How many of `waiting` the next request carries: the first, then those before a barrier, within `max` events and the body limit. */
export function takeChunk(waiting: readonly { bytes: number; barrier?: boolean }[], max: number): number {
  let count = 0;
  let bytes = ENVELOPE_BYTES;
  for (const item of waiting) {
    if (count > 0 && (count >= max || item.barrier || bytes + item.bytes + 1 > LIMITS.eventBatchBytes)) break;
    count += 1;
    bytes += item.bytes + 1;
  }
  return count;
}

export function batchSize(said: number | undefined): number {
  return said === undefined ? 1 : Math.max(1, Math.min(said, LIMITS.eventBatchMax));
}

/** Each looked-at event's outcome in order (the accepted prefix, then the refused one); an answer that does not fit what was sent is not trusted at all. */
export function batchOutcomes(sent: readonly EventBody[], answer: BatchAccepted, now: number): EventOutcome[] {
  const { accepted, refused } = answer;
  const refusedOne = refused === null ? undefined : sent[refused.index];
  const fits =
    accepted.length <= sent.length &&
    accepted.every((receipt, i) => receipt.event_id === sent[i]!.event_id) &&
    // Either every event was taken, or the one right after the taken ones was refused.
    (refused === null
      ? accepted.length === sent.length
      : refused.index === accepted.length && refusedOne !== undefined && (refused.event_id ?? refusedOne.event_id) === refusedOne.event_id);
  if (!fits)
    throw new ServerError("the batch answer does not match the events sent", {
      retryable: false,
      code: "invalid_answer",
      facts: { kind: "batch_mismatch" },
    });
  const outcomes: EventOutcome[] = accepted.map((value) => (value.state === "failed" ? { ok: false, error: receiptFailed() } : { ok: true, value }));
  if (refused) {
    const headers = refused.retry_after_seconds === undefined ? {} : { "retry-after": String(refused.retry_after_seconds) };
    outcomes.push({ ok: false, error: classifyHttpFailure(refused.status, headers, now, refused.error) });
  }
  return outcomes;
}
