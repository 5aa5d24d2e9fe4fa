/**
 * The wire contract between the Pi extension and the notify-webhook server (docs/protocol.md).
 * One zod schema per shape; the client builds against them, the server validates with them, and
 * the tests of both sides import them. Pure: no I/O.
 */
import { z } from "zod";

export const API_BASE_PATH = "/api/agent-notify/v1";
export const DEFAULT_ENDPOINT = `http://127.0.0.1:5140${API_BASE_PATH}/events`;
export const PROTOCOL_VERSIONS = { events: 1, commands: 2 } as const;

export const LIMITS = {
  idChars: 128,
  sourceChars: 120,
  taskChars: 200,
  summaryChars: 1200,
  detailsBytes: 4 * 1024,
  urlChars: 2048,
  eventBodyBytes: 64 * 1024,
  operatorBodyBytes: 12 * 1024 * 1024,
  instructionChars: 4000,
  previewChars: 200,
  projectChars: 200,
  modelChars: 200,
  imagesPerCommand: 4,
  imageBytes: 4 * 1024 * 1024,
  commandImageBytes: 8 * 1024 * 1024,
  imageBudgetBytes: 32 * 1024 * 1024,
  commandListMax: 50,
  longPollMaxMs: 25_000,
  retryAfterMaxMs: 60_000,
} as const;

/** Replaces the last path segment of the configured events endpoint, e.g. `events` → `sessions/heartbeat`. */
export function endpointUrl(eventsEndpoint: string, path: string): string {
  const url = new URL(eventsEndpoint);
  url.pathname = url.pathname.replace(/\/[^/]*$/, "") + "/" + path.replace(/^\//, "");
  url.search = "";
  return url.toString();
}

export const Id = z
  .string()
  .min(1)
  .max(LIMITS.idChars)
  .regex(/^[A-Za-z0-9._:-]+$/, "must be 1-128 characters of A-Z a-z 0-9 . _ : -");
export const Timestamp = z.iso.datetime({ offset: false });

const nonNegativeSafeInt = z.number().int().nonnegative().max(Number.MAX_SAFE_INTEGER);
const positiveSafeInt = z.number().int().positive().max(Number.MAX_SAFE_INTEGER);

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

const httpUrl = z
  .string()
  .max(LIMITS.urlChars)
  .refine((value) => {
    try {
      const { protocol } = new URL(value);
      return protocol === "http:" || protocol === "https:";
    } catch {
      return false;
    }
  }, "must be an http(s) URL");

const Details = z
  .record(z.string(), z.unknown())
  .refine((d) => Buffer.byteLength(JSON.stringify(d), "utf8") <= LIMITS.detailsBytes, {
    message: `must serialise to at most ${LIMITS.detailsBytes} bytes`,
  });

export const EventBody = z.strictObject({
  event_id: Id,
  session_id: Id,
  runtime_id: Id.optional(),
  source: z.string().max(LIMITS.sourceChars),
  task: z.string().max(LIMITS.taskChars),
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
export type EventBodyInput = z.input<typeof EventBody>;

export const ReceiptState = z.enum(["queued", "processing", "context_injected", "delivered", "failed"]);
export type ReceiptState = z.infer<typeof ReceiptState>;

export const EventAccepted = z.object({
  event_id: Id,
  state: ReceiptState,
  duplicate: z.boolean(),
});
export type EventAccepted = z.infer<typeof EventAccepted>;

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
});
export type Receipt = z.infer<typeof Receipt>;

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

export const HeartbeatAnswer = z.object({ ttl_ms: z.number().int().positive(), server_time: Timestamp });
export type HeartbeatAnswer = z.infer<typeof HeartbeatAnswer>;

export const OfflineBody = z.strictObject({ session_id: Id, runtime_id: Id });
export const OfflineAnswer = z.object({ removed: z.boolean() });

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

export const ClaimQuery = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  capabilities: z.string().max(200).optional(),
  wait_ms: z.coerce.number().int().min(0).max(LIMITS.longPollMaxMs).default(0),
});

export const ClaimedCommand = z.object({
  command_id: Id,
  event_id: Id,
  origin: CommandOrigin,
  instruction: z.string(),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand),
  created_at: Timestamp,
});
export type ClaimedCommand = z.infer<typeof ClaimedCommand>;

export const ClaimAnswer = z.union([
  z.object({ command: z.null() }),
  z.object({ command: ClaimedCommand, lease: z.object({ token: z.string().min(1), expires_at: Timestamp }) }),
]);
export type ClaimAnswer = z.infer<typeof ClaimAnswer>;

export const AckBody = z.strictObject({ session_id: Id, runtime_id: Id, lease_token: z.string().min(1).max(256) });
export const AckAnswer = z.object({ state: z.literal("accepted") });

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

export const OperatorCreateCommand = z.strictObject({
  session_id: Id,
  event_id: Id.optional(),
  instruction: z.string().min(1).max(LIMITS.instructionChars),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand).optional(),
  request_key: z.string().min(1).max(512).optional(),
});
export type OperatorCreateCommand = z.infer<typeof OperatorCreateCommand>;

export const OperatorCancelBody = z.strictObject({ session_id: Id });
export const OperatorListQuery = z.strictObject({
  session_id: Id,
  limit: z.coerce.number().int().min(1).max(LIMITS.commandListMax).default(20),
});

/** The safe projection of an online session: nothing but these keys ever leaves the registry. */
export const SessionProjection = z.object({
  session_id: Id,
  project: z.string(),
  model: z.string().nullable(),
  state: SessionRunState,
  supports_images: z.boolean(),
  last_activity_at: Timestamp,
  last_seen_at: Timestamp,
});
export type SessionProjection = z.infer<typeof SessionProjection>;

export const CommandSummary = z.object({
  command_id: Id,
  event_id: Id,
  session_id: Id,
  origin: CommandOrigin,
  state: CommandState,
  cancellable: z.boolean(),
  preview: z.string().max(LIMITS.previewChars),
  image_count: z.number().int().nonnegative(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type CommandSummary = z.infer<typeof CommandSummary>;

/** `POST /operator/commands`: 201 for a new command, 200 with `duplicate: true` for a repeated request key. */
export const OperatorCommandCreated = z.object({ command: CommandSummary, duplicate: z.boolean() });
export type OperatorCommandCreated = z.infer<typeof OperatorCommandCreated>;
export const OperatorCommandList = z.object({ commands: z.array(CommandSummary).max(LIMITS.commandListMax) });
export const OperatorSessionList = z.object({ sessions: z.array(SessionProjection) });
export const CancelAnswer = z.object({ state: z.literal("cancelled") });

export const ErrorCode = z.enum([
  "unauthorized",
  "payload_too_large",
  "invalid_json",
  "invalid_request",
  "invalid_context_usage",
  "idempotency_key_reused",
  "rate_limited",
  "not_ready",
  "not_found",
  "session_offline",
  "event_session_mismatch",
  "delivery_started",
  "already_accepted",
  "lease_mismatch",
  "image_budget_exceeded",
  "invalid_image",
  "images_not_supported",
  "operator_disabled",
  "internal_error",
]);
export type ErrorCode = z.infer<typeof ErrorCode>;

export const ErrorAnswer = z.object({
  error: ErrorCode,
  issues: z.array(z.object({ path: z.string(), message: z.string() })).optional(),
});
export type ErrorAnswer = z.infer<typeof ErrorAnswer>;

/** Flattens zod issues into the wire's `{path, message}` list. */
export function wireIssues(error: z.ZodError): { path: string; message: string }[] {
  return error.issues.map((issue) => ({ path: issue.path.map(String).join("."), message: issue.message }));
}

// ── Local desktop sink (docs/local-sink.md): one-way `POST /event` over a Unix domain socket. ──
// Payload schemas are the whitelist: parsing with them drops every key not listed (z.object strips),
// and a missing optional key means "unknown", never zero.

export const SINK_TEXT_CHARS = 500;
export const SINK_TRUNCATION_MARK = "…";
export const SinkEventType = z.enum(["run.started", "run.completed", "run.failed", "run.cancelled", "tool.started", "tool.completed"]);
export type SinkEventType = z.infer<typeof SinkEventType>;

const SinkText = z.string().max(SINK_TEXT_CHARS + SINK_TRUNCATION_MARK.length);
const SinkSeconds = z.number().nonnegative().finite();
const SinkRunMeta = {
  run_id: z.string().min(1),
  project: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  agent_name: z.string().min(1).optional(),
};
const SinkToolMeta = { run_id: z.string().min(1), tool_call_id: z.string().min(1), tool: z.string().min(1) };

export const SinkPayloads = {
  "run.started": z.object({ ...SinkRunMeta, prompt: SinkText.optional() }),
  "run.completed": z.object({
    ...SinkRunMeta,
    duration_seconds: SinkSeconds.optional(),
    had_response: z.boolean(),
    answer: SinkText.optional(),
    answered_at: Timestamp.optional(),
  }),
  "run.failed": z.object({ ...SinkRunMeta, duration_seconds: SinkSeconds.optional(), error: SinkText }),
  "run.cancelled": z.object({ ...SinkRunMeta, duration_seconds: SinkSeconds.optional() }),
  "tool.started": z.object(SinkToolMeta),
  "tool.completed": z.object({ ...SinkToolMeta, ok: z.boolean(), duration_seconds: SinkSeconds.optional() }),
} as const;
export type SinkPayload<T extends SinkEventType> = z.infer<(typeof SinkPayloads)[T]>;

const sinkEnvelope = <T extends SinkEventType>(type: T) =>
  z.object({ type: z.literal(type), ts: Timestamp, session_id: z.string().min(1), payload: SinkPayloads[type] });
export const SinkEnvelope = z.discriminatedUnion("type", [
  sinkEnvelope("run.started"),
  sinkEnvelope("run.completed"),
  sinkEnvelope("run.failed"),
  sinkEnvelope("run.cancelled"),
  sinkEnvelope("tool.started"),
  sinkEnvelope("tool.completed"),
]);
export type SinkEnvelope = z.infer<typeof SinkEnvelope>;

// ── Governance (issue 7): the audit trail and the agent's tool-call records. ──

/** Who acted: the Pi extension, the persona's tools, an operator, the owner's console page, the server itself, or its watchdog. */
export const AuditActor = z.enum(["agent", "persona", "operator", "console", "server", "watchdog"]);
export type AuditActor = z.infer<typeof AuditActor>;

export const AUDIT_PAGE_MAX = 200;

/** The family of an audit action: the part before its first dot (`command.pending` is a `command`). */
export const AuditKind = z.enum(["event", "command", "operator", "console", "persona", "tool_call", "watchdog"]);
export type AuditKind = z.infer<typeof AuditKind>;

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

export const ProgressStage = z.enum(["started", "progress", "blocked", "awaiting_approval", "done", "failed"]);
export type ProgressStage = z.infer<typeof ProgressStage>;
export const ProgressSeverity = z.enum(["info", "warn", "critical"]);
export type ProgressSeverity = z.infer<typeof ProgressSeverity>;

/**
 * `POST /audit/tool-calls`: the extension's record of one call of its model-callable tool that was
 * refused (a sent call is audited through its event). `input` is the model's arguments as given.
 */
export const ToolCallRecord = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  tool: z.literal("report_progress"),
  tool_call_id: Id,
  decision: z.enum(["sent", "refused"]),
  reason: z.string().max(200).nullable(),
  event_id: Id.nullable(),
  input: Details,
  created_at: Timestamp,
});
export type ToolCallRecord = z.infer<typeof ToolCallRecord>;
export const ToolCallRecorded = z.object({ recorded: z.literal(true) });
export type ToolCallRecorded = z.infer<typeof ToolCallRecorded>;
