/** Server health and the recipient check the extension asks before it switches on. */
import { z } from "zod";
import { PushHealth } from "./push.ts";

export const RecipientStatus = z.enum(["ok", "not_added", "unreachable", "unknown"]);
export type RecipientStatus = z.infer<typeof RecipientStatus>;
export const RecipientAnswer = z.object({
  qq: z.string().nullable(),
  anon_qq: z.string().nullable(),
  status: RecipientStatus,
  reason: z.string().nullable(),
});
export type RecipientAnswer = z.infer<typeof RecipientAnswer>;

/** Where the server's notices end up now: a real persona (`persona`), the log persona that only prints them (`log`), no persona but a bot that sends
 * `delivery: "direct"` notices (`direct`), or nowhere (`none`). `reason` names what stands in the way, null when nothing does. */
export const NoticeRoute = z.enum(["persona", "direct", "log", "none"]);
export type NoticeRoute = z.infer<typeof NoticeRoute>;
export const NoticesAnswer = z.object({
  route: NoticeRoute,
  ready: z.boolean(),
  /** `no_persona`, `bot_not_found` or `bot_offline`; a newer server may add codes, so any string is read. */
  reason: z.string().nullable(),
});
export type NoticesAnswer = z.infer<typeof NoticesAnswer>;

export const HealthAnswer = z.object({
  ok: z.literal(true),
  version: z.string(),
  protocol: z.object({ events: z.number().int(), commands: z.number().int() }),
  capabilities: z.array(z.string()),
  session_heartbeat_timeout_ms: z.number().int().positive(),
  /** Absent from servers before 2026-12 (they said nothing about where notices go). */
  notices: NoticesAnswer.optional(),
  /** Whether a chat bot that can reach the owner is loaded (false on the plain standalone server). */
  chat: z.boolean().optional(),
  /** The phone push route (ntfy); absent from servers before 2026-12-02. */
  push: PushHealth.optional(),
});
export type HealthAnswer = z.infer<typeof HealthAnswer>;
