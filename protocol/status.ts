/**
 * Server health and the recipient check the extension asks before it switches on.
 */
import { z } from "zod";

export const RecipientStatus = z.enum(["ok", "not_added", "unreachable", "unknown"]);
export type RecipientStatus = z.infer<typeof RecipientStatus>;
export const RecipientAnswer = z.object({
  qq: z.string().nullable(),
  anon_qq: z.string().nullable(),
  status: RecipientStatus,
  reason: z.string().nullable(),
});
export type RecipientAnswer = z.infer<typeof RecipientAnswer>;

export const HealthAnswer = z.object({
  ok: z.literal(true),
  version: z.string(),
  protocol: z.object({ events: z.number().int(), commands: z.number().int() }),
  capabilities: z.array(z.string()),
  session_heartbeat_timeout_ms: z.number().int().positive(),
});
export type HealthAnswer = z.infer<typeof HealthAnswer>;
