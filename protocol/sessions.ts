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
  /** True when the server also takes heartbeats over `GET /sessions/stream` (absent: HTTP only). */
  presence_stream: z.boolean().optional(),
  /** True when the stream also takes quiet frames (`"quiet": true`: answered only if refused). */
  quiet_beats: z.boolean().optional(),
});
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswer>;

/** A refused heartbeat on the presence stream: the HTTP route's error code and status, and its Retry-After in ms. */
export const StreamRefusal = z.object({
  error: z.string(),
  status: z.number().int(),
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
  retry_after_ms: z.number().int().nonnegative().optional(),
  /** The refused frame was a quiet one (the client wrote it without waiting for an answer). */
  quiet: z.literal(true).optional(),
});
export type StreamRefusal = z.infer<typeof StreamRefusal>;

export const StreamAnswer = z.union([StreamRefusal, HeartbeatAnswer]);
export type StreamAnswer = z.infer<typeof StreamAnswer>;

/** Splits a stream frame into its `quiet` flag and the heartbeat body; a non-boolean `quiet` stays in the body, where the strict schema refuses it. */
export function splitStreamFrame(frame: unknown): { quiet: boolean; body: unknown } {
  if (typeof frame !== "object" || frame === null || Array.isArray(frame) || !Object.hasOwn(frame, "quiet")) return { quiet: false, body: frame };
  const { quiet, ...body } = frame as Record<string, unknown>;
  return typeof quiet === "boolean" ? { quiet, body } : { quiet: false, body: frame };
}

export const PRESENCE_STREAM_PATH = "/sessions/stream";

/** Close codes of the presence stream; a handshake refusal is 4000 + its error code's HTTP status (4401, 4429, 4503). */
export const STREAM_CLOSE = {
  refusedBase: 4000,
  replaced: 4409,
  idle: 4408,
  binary: 1003,
  policy: 1008,
  tooBig: 1009,
  full: 1013,
} as const;

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
