/** The phone push route on the wire: a push's receipt, `/health`'s view of it, and a button press's answer. */
import { z } from "zod";
import { ApprovalCode, ApprovalDecision, ApprovalState } from "./approvals.ts";
import { Timestamp } from "./wire.ts";

/** Where a push goes: ntfy (with answer buttons), or a Feishu (Lark) custom bot (notify-only). */
export const PushRoute = z.enum(["ntfy", "feishu"]);
export type PushRoute = z.infer<typeof PushRoute>;

export const PushState = z.enum(["queued", "retrying", "delivered", "failed"]);
export type PushState = z.infer<typeof PushState>;

/** One push's receipt; `error` is `<code>: <reason>` like a chat receipt's. */
export const PushReceipt = z.object({
  route: PushRoute,
  state: PushState,
  attempts: z.number().int().nonnegative(),
  error: z.string().nullable(),
  updated_at: Timestamp,
});
export type PushReceipt = z.infer<typeof PushReceipt>;

/** `GET /health`'s `push`: the route, how an approval is answered from it, the newest receipt. */
export const PushHealth = z.object({
  /** A newer server may name other routes: any string is read. */
  route: z.string(),
  answers: z.enum(["buttons", "text"]).nullable(),
  last: z.object({ state: PushState, error: z.string().nullable(), at: Timestamp }).nullable(),
});
export type PushHealth = z.infer<typeof PushHealth>;

/** `POST /push/answer/{capability}` → 200: the approval this press decided. */
export const PushAnswer = z.object({ code: ApprovalCode, decision: ApprovalDecision, state: ApprovalState });
export type PushAnswer = z.infer<typeof PushAnswer>;
