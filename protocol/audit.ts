/** The audit trail: who acted, what was recorded, and how the operator pages through it. */
import { z } from "zod";
import { Id, Timestamp } from "./wire.ts";

/** Who acted: the Pi extension, the persona's tools, an operator, the owner's console page, the server itself, or its watchdog. */
export const AuditActor = z.enum(["agent", "persona", "operator", "console", "server", "watchdog"]);
export type AuditActor = z.infer<typeof AuditActor>;

export const AUDIT_PAGE_MAX = 200;

/** The family of an audit action: the part before its first dot (`command.pending` is a `command`). */
export const AuditKind = z.enum(["event", "command", "operator", "console", "persona", "tool_call", "watchdog", "trigger"]);

/** `GET /operator/audit`: newest first; `before` (an entry id) pages further back. */
export const AuditQuery = z.strictObject({
  session_id: Id.optional(),
  kind: AuditKind.optional(),
  since: Timestamp.optional(),
  /** Exclusive upper bound on the time. */
  until: Timestamp.optional(),
  before: z.coerce.number().int().positive().max(Number.MAX_SAFE_INTEGER).optional(),
  limit: z.coerce.number().int().min(1).max(AUDIT_PAGE_MAX).default(50),
});
export type AuditQuery = z.infer<typeof AuditQuery>;

export const AuditEntry = z.object({
  id: z.number().int().positive(),
  at: Timestamp,
  actor: AuditActor,
  action: z.string(),
  session_id: Id.nullable(),
  subject: z.string().nullable(),
  data: z.record(z.string(), z.unknown()),
});
export type AuditEntry = z.infer<typeof AuditEntry>;

/** `next_before`: pass as `before` for the next (older) page; null when this page is the last. */
export const AuditPage = z.object({ entries: z.array(AuditEntry).max(AUDIT_PAGE_MAX), next_before: z.number().int().positive().nullable() });
export type AuditPage = z.infer<typeof AuditPage>;
