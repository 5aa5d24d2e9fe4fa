/** Presence: heartbeats, offline, and the safe projection of an online session. */
import { z } from "zod";
import { Id, LIMITS, Timestamp } from "./wire.ts";

export const SessionRunState = z.enum(["idle", "running"]);
export type SessionRunState = z.infer<typeof SessionRunState>;

export const Heartbeat = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  project: z
    .string()
    .min(1)
    .max(LIMITS.projectChars)
    .refine((p) => !/[\\/]/.test(p), "must be a directory basename, not a path"),
  model: z.string().max(LIMITS.modelChars).nullable(),
  state: SessionRunState,
  supports_images: z.boolean(),
  command_protocol: z.number().int().positive(),
  last_activity_at: Timestamp,
  // What the session was doing at its last activity (a tool name, never its output).
  activity: z.string().max(LIMITS.modelChars).nullable().optional(),
});
export type Heartbeat = z.infer<typeof Heartbeat>;

// Not strict: a client ignores keys it does not know, so the server can add some (as protocol 3 did).
export const HeartbeatAnswer = z.object({
  ttl_ms: z.number().int().positive(),
  server_time: Timestamp,
  /** Absent from a protocol-2 server: the client then uses no control lane. */
  command_protocol: z.number().int().positive().optional(),
});
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswer>;

export const OfflineBody = z.strictObject({ session_id: Id, runtime_id: Id });
export const OfflineAnswer = z.object({ removed: z.boolean() });

/** The safe projection of an online session: nothing else leaves the registry; `project`, `model` and `activity` are shown forms (common/shown-name.ts). */
export const SessionProjection = z.object({
  session_id: Id,
  project: z.string(),
  model: z.string().nullable(),
  state: SessionRunState,
  /** The tool running, while the session runs one; never its arguments or output. */
  activity: z.string().nullable(),
  supports_images: z.boolean(),
  last_activity_at: Timestamp,
  last_seen_at: Timestamp,
  /** The project's letters mix scripts as look-alikes do (`ѕhop`): listings flag it. */
  mixed_scripts: z.boolean(),
});
export type SessionProjection = z.infer<typeof SessionProjection>;
