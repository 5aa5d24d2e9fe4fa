/** Events (protocol 1): the notice body the extension posts, its acceptance and its receipt. */
import { z } from "zod";
import { PushReceipt } from "./push.ts";
import { Details, Id, LIMITS, Timestamp, httpUrl, nonNegativeSafeInt, oneLine, positiveSafeInt } from "./wire.ts";

/** Pi's current context estimate; `used_tokens` and `percent` are known together or not at all. */
export const ContextUsage = z
  .strictObject({
    used_tokens: nonNegativeSafeInt.nullable(),
    context_window: positiveSafeInt,
    percent: z.number().nonnegative().finite().nullable(),
  })
  .refine((u) => (u.used_tokens === null) === (u.percent === null), {
    message: "used_tokens and percent must both be known or both be null",
  });
export type ContextUsage = z.infer<typeof ContextUsage>;

export const EventStatus = z.enum(["started", "progress", "completed", "failed", "tool_error", "warning", "info"]);
export type EventStatus = z.infer<typeof EventStatus>;
export const DeliveryRoute = z.enum(["anon", "direct"]);
export type DeliveryRoute = z.infer<typeof DeliveryRoute>;

export const EventBody = z.strictObject({
  event_id: Id,
  session_id: Id,
  runtime_id: Id.optional(),
  // One line each: the direct message's fixed format must not be forgeable from them.
  source: oneLine(LIMITS.sourceChars),
  task: oneLine(LIMITS.taskChars),
  status: EventStatus,
  summary: z.string().max(LIMITS.summaryChars),
  details: Details.nullable().default(null),
  url: httpUrl.nullable().default(null),
  // Absent means unknown: old clients do not send it.
  context_usage: ContextUsage.nullable().default(null),
  created_at: Timestamp,
  delivery: DeliveryRoute.default("anon"),
});
export type EventBody = z.infer<typeof EventBody>;

/** Event ids the server gives its own notices (watchdog, an approval's mention to the persona, the mute digest, a trigger's notice). `POST /events` refuses
 * them, so what only the server may say (break through a mute) can be told by the id alone. */
export const SERVER_EVENT_ID_PREFIXES = ["watchdog:", "approval:", "mute-digest:", "trigger:"] as const;
export function isServerEventId(eventId: string): boolean {
  return SERVER_EVENT_ID_PREFIXES.some((prefix) => eventId.startsWith(prefix));
}
export type EventBodyInput = z.input<typeof EventBody>;

export const ReceiptState = z.enum(["queued", "processing", "context_injected", "delivered", "failed"]);
export type ReceiptState = z.infer<typeof ReceiptState>;

export const EventAccepted = z.object({
  event_id: Id,
  state: ReceiptState,
  duplicate: z.boolean(),
  /** How many events one `POST /events/batch` may carry; absent from a server without the route. */
  batch_max: z.number().int().positive().optional(),
});
export type EventAccepted = z.infer<typeof EventAccepted>;

/** `POST /events/batch`: each element is judged as a `POST /events` body, in order, so only the array is checked here. */
export const EventBatch = z.strictObject({ events: z.array(z.unknown()).min(1).max(LIMITS.eventBatchMax) });

/** The event that ended a batch, with what the single route would have answered for it. */
export const BatchRefusal = z.object({
  index: z.number().int().nonnegative(),
  event_id: Id.nullable(),
  status: z.number().int().min(400).max(599),
  error: z.string(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  retry_after_seconds: z.number().nonnegative().optional(),
});
export type BatchRefusal = z.infer<typeof BatchRefusal>;

/** The accepted prefix of a batch, one receipt per event in array order, and the refusal that ended it. */
export const BatchAccepted = z.object({
  accepted: z.array(EventAccepted),
  refused: BatchRefusal.nullable(),
});
export type BatchAccepted = z.infer<typeof BatchAccepted>;

export const Receipt = z.object({
  event_id: Id,
  session_id: Id,
  status: EventStatus,
  state: ReceiptState,
  attempts: z.number().int().nonnegative(),
  created_at: Timestamp,
  updated_at: Timestamp,
  error: z.string().nullable(),
  // The platform's message id of a `direct` delivery; null otherwise. Optional for older servers.
  message_id: z.string().nullable().optional(),
  /** The phone push of this event (ntfy), null when not pushed; absent from older servers. */
  push: PushReceipt.nullable().optional(),
});
export type Receipt = z.infer<typeof Receipt>;
