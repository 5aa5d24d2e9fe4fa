/** Hosts on the wire: a host's heartbeat, the start job's payload, and `POST /operator/sessions`. */
import { z } from "zod";
import type { CommandSummary, StartRefusal } from "./queue.ts";
import { Id, LIMITS } from "./wire.ts";

export const HOST_PROTOCOL = 1;
export const HOST_PROJECTS_MAX = 500;

/** One path segment: never a path, never `.`/`..` or a hidden folder. */
export const ProjectName = z
  .string()
  .min(1)
  .max(LIMITS.projectChars)
  .refine((p) => !/[\\/\0]/.test(p) && !p.startsWith("."), "must be one folder name under a root, not a path");

export const HostName = z
  .string()
  .min(1)
  .max(64)
  .regex(/^[A-Za-z0-9._-]+$/, "must be 1-64 characters of A-Z a-z 0-9 . _ -");

export const HostHeartbeat = z.strictObject({
  host_id: Id,
  runtime_id: Id,
  name: HostName,
  pi: z.strictObject({ command: z.string().min(1).max(1024), version: z.string().max(64).nullable() }),
  projects: z.array(z.strictObject({ name: ProjectName, root: z.string().min(1).max(4096) })).max(HOST_PROJECTS_MAX),
  max_sessions: z.number().int().positive().max(1000),
  sessions: z.array(Id).max(1000),
  host_protocol: z.number().int().positive(),
});
export type HostHeartbeat = z.infer<typeof HostHeartbeat>;

export const HostHeartbeatAnswer = z.object({ ttl_ms: z.number().int().positive(), server_time: z.string() });

/** A stopping host's sign-off: its id is free for the next runtime at once, not one TTL later. */
export const HostOfflineBody = z.strictObject({ host_id: Id, runtime_id: Id });

/** A run's bounds: the extension stops a run past either (`failure_reason` `turn_limit` / `time_limit`). */
export const RunLimits = z.strictObject({
  turns: z.number().int().positive().max(1000).optional(),
  minutes: z.number().int().positive().max(1440).optional(),
});
export type RunLimits = z.infer<typeof RunLimits>;

export const StartPayload = z.strictObject({
  project: ProjectName,
  task: z.string().min(1).max(LIMITS.instructionChars),
  session_id: Id,
  limits: RunLimits.optional(),
  /** The session's approval gate forced on in strict mode, whatever the user's config (a trigger's session). */
  approvals: z.literal("strict").optional(),
});
export type StartPayload = z.infer<typeof StartPayload>;

export const CreateSessionBody = z.strictObject({
  project: ProjectName,
  task: z.string().trim().min(1).max(LIMITS.instructionChars),
  host: HostName.optional(),
  limits: RunLimits.optional(),
});
export type CreateSessionBody = z.infer<typeof CreateSessionBody>;

/** What `StartService.start` takes: a surface's body, and from a trigger strict approvals and the session it resumes (Pi opens that session's file). */
export type StartRequest = CreateSessionBody & Partial<Pick<StartPayload, "approvals" | "session_id">>;

/** What a start came to: started (with the session it became), refused by the host, or still queued. */
export type StartResult =
  | { state: "started"; session_id: string; host: string; project: string; command: CommandSummary }
  | { state: "refused"; refusal: StartRefusal; host: string; project: string; command: CommandSummary }
  | { state: "queued"; host: string; project: string; command: CommandSummary };
