/** The command queue on the wire (protocols 2 and 3): kinds, lanes, claims, leases, ACKs, images. */
import { z } from "zod";
import { ApprovalDecisionPayload } from "./approvals.ts";
import { Id, LIMITS, Timestamp } from "./wire.ts";

export const ImageMime = z.enum(["image/png", "image/jpeg", "image/gif", "image/webp"]);
export type ImageMime = z.infer<typeof ImageMime>;
export const CommandImage = z.strictObject({
  mime_type: ImageMime,
  // Raw base64 only: no data: prefix, no URLs.
  data: z.base64(),
});
export type CommandImage = z.infer<typeof CommandImage>;

export const CommandOrigin = z.enum(["anon", "proactive", "operator"]);
export type CommandOrigin = z.infer<typeof CommandOrigin>;
export const CommandState = z.enum(["pending", "leased", "accepted", "cancelled"]);
export type CommandState = z.infer<typeof CommandState>;
export const CancelReason = z.enum(["operator", "expired"]);
export type CancelReason = z.infer<typeof CancelReason>;

/** `instruction`: a message for the model; `stop` and `approval_decision` control the run (protocol 3); `start` is a host's job. */
export const CommandKind = z.enum(["instruction", "stop", "approval_decision", "start"]);
export type CommandKind = z.infer<typeof CommandKind>;
export type ControlKind = Exclude<CommandKind, "instruction" | "start">;
/** The command protocol that brought kinds and the control lane. */
export const CONTROL_PROTOCOL = 3;

/** Which commands a claim may receive: instructions only (the default, and all protocol 2 knows), control commands only, or a host's start jobs. */
export const CommandLane = z.enum(["instructions", "control", "host"]);
export type CommandLane = z.infer<typeof CommandLane>;

export function laneOf(kind: CommandKind): CommandLane {
  if (kind === "start") return "host";
  return kind === "instruction" ? "instructions" : "control";
}

export const StopPayload = z.strictObject({});

/** The payload each control kind carries; an instruction carries none. */
export const CONTROL_PAYLOADS = { stop: StopPayload, approval_decision: ApprovalDecisionPayload } as const satisfies Record<ControlKind, z.ZodType>;

/** What the client did with a control command, sent with its ACK. `unknown`: no such call waits, or a kind the client does not know. */
export const CommandOutcome = z.enum(["stopped", "already_idle", "applied", "already_answered", "mismatch", "unknown", "started", "refused"]);
export type CommandOutcome = z.infer<typeof CommandOutcome>;
export const OUTCOMES: Readonly<Record<Exclude<CommandKind, "instruction">, readonly CommandOutcome[]>> = {
  stop: ["stopped", "already_idle", "unknown"],
  approval_decision: ["applied", "already_answered", "mismatch", "unknown"],
  start: ["started", "refused"],
};

/** Why a host did not start a job (docs/protocol.md, Hosts). */
export const StartRefusal = z.enum(["unknown_project", "root_not_allowed", "pi_not_found", "too_many_sessions", "start_failed"]);
export type StartRefusal = z.infer<typeof StartRefusal>;

/** The run a stop aborted, sent with its `stopped` ACK: a run typed in the terminal may have sent no notice. Untrusted text, like a notice's task. */
export const StoppedRun = z.strictObject({
  /** Absent when the extension joined the run mid-way. */
  started_at: Timestamp.optional(),
  task: z.string().max(LIMITS.taskChars),
});
export type StoppedRun = z.infer<typeof StoppedRun>;

export const ClaimQuery = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  capabilities: z.string().max(200).optional(),
  wait_ms: z.coerce.number().int().min(0).max(LIMITS.longPollMaxMs).default(0),
  lane: CommandLane.default("instructions"),
});

export const ClaimedCommand = z.object({
  command_id: Id,
  event_id: Id,
  origin: CommandOrigin,
  // A protocol-2 server sends no kind: everything it hands out is an instruction.
  kind: CommandKind.default("instruction"),
  instruction: z.string(),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand),
  /** Control commands only; checked by the handler of its kind against CONTROL_PAYLOADS. */
  payload: z.record(z.string(), z.unknown()).optional(),
  created_at: Timestamp,
});
export type ClaimedCommand = z.infer<typeof ClaimedCommand>;

export const ClaimAnswer = z.union([
  z.object({ command: z.null() }),
  z.object({ command: ClaimedCommand, lease: z.object({ token: z.string().min(1), expires_at: Timestamp }) }),
]);
export type ClaimAnswer = z.infer<typeof ClaimAnswer>;

export const AckBody = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  lease_token: z.string().min(1).max(256),
  /** Required for control commands, refused for instructions. */
  outcome: CommandOutcome.optional(),
  /** A stop's `stopped` only: the run it aborted. */
  run: StoppedRun.optional(),
  /** A start's `refused` only: why. */
  refusal: StartRefusal.optional(),
});
export const AckAnswer = z.object({ state: z.literal("accepted") });

export const CommandSummary = z.object({
  command_id: Id,
  event_id: Id,
  session_id: Id,
  origin: CommandOrigin,
  kind: CommandKind,
  state: CommandState,
  /** What the client reported with its ACK; null for instructions and before the ACK. */
  outcome: CommandOutcome.nullable(),
  /** Why a cancelled command was cancelled: by an operator, or by the server when a stop was not claimed in time. */
  cancel_reason: CancelReason.nullable(),
  cancellable: z.boolean(),
  preview: z.string().max(LIMITS.previewChars),
  image_count: z.number().int().nonnegative(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type CommandSummary = z.infer<typeof CommandSummary>;
