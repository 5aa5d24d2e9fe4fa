/** How an event body becomes a receipt: reading it, what counts as the same body on replay, the stored row. */
import { createHash } from "node:crypto";
import { EventBody, type DeliveryRoute, type Receipt } from "../../protocol/events.ts";
import { wireIssues } from "../../protocol/wire.ts";
import { DomainError } from "../../common/domain-error.ts";

/** A receipt as stored: `body` is the validated request body as JSON (what is injected, and what a replay is compared with); `seq` the acceptance
 * order, in which the worker handles each delivery route. */
export type EventRow = Required<Omit<Receipt, "push">> & { delivery: DeliveryRoute; body: string; body_hash: string; seq: number; received_at: string };

/** The body as the protocol reads it; any problem inside `context_usage` gets its own code. */
export function parseEvent(body: unknown): EventBody {
  const result = EventBody.safeParse(body);
  if (result.success) return result.data;
  const issues = wireIssues(result.error);
  const aboutContextUsage = result.error.issues.some((issue) => issue.path[0] === "context_usage");
  throw new DomainError(aboutContextUsage ? "invalid_context_usage" : "invalid_request", { issues });
}

export function newEventRow(event: EventBody, hash: string, seq: number, now: string): EventRow {
  const { event_id, session_id, status, delivery, created_at } = event;
  const fresh = { state: "queued", attempts: 0, error: null, message_id: null } as const;
  return { event_id, session_id, status, delivery, body: JSON.stringify(event), body_hash: hash, seq, ...fresh, created_at, received_at: now, updated_at: now };
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
  const { event_id, session_id, status, state, attempts, created_at, updated_at, error, message_id } = row;
  return { event_id, session_id, status, state, attempts, created_at, updated_at, error, message_id };
}
