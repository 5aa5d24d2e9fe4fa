/** Approvals on the wire: a person answers for one exact tool call. */
import { z } from "zod";
import { Id, Timestamp } from "./wire.ts";

export const APPROVAL_LIMITS = {
  actionChars: 40,
  reasonChars: 200,
  /** The display form of a command (`preview`, the terminal dialog, the chat): head and tail past this. */
  previewChars: 1000,
  /** The longest command a request carries; a longer one is refused whole by both sides, never cut. */
  commandChars: 16_384,
  /** How much of each place a rule matched is sent (`matched[].at`). */
  siteChars: 200,
  rulesMax: 16,
  cwdChars: 4096,
  toolChars: 128,
  listMax: 100,
  grantMinutesMax: 240,
} as const;

export const ApprovalDecision = z.enum(["approved", "rejected"]);
export type ApprovalDecision = z.infer<typeof ApprovalDecision>;
export const ApprovalOutcome = z.enum(["approved", "rejected", "timeout"]);
export type ApprovalOutcome = z.infer<typeof ApprovalOutcome>;
export const ApprovalVia = z.enum(["chat", "operator", "console", "ntfy", "terminal", "policy", "timeout", "aborted"]);
export type ApprovalVia = z.infer<typeof ApprovalVia>;
/** Where a person can answer on the server's side (`ntfy`: a button on the phone push). */
export const PersonVia = z.enum(["chat", "operator", "console", "ntfy"]);
export type PersonVia = z.infer<typeof PersonVia>;
/** `pending` → `decided` (a person decided on the server) → final; `vanished`: the session's heartbeats stopped. */
export const ApprovalState = z.enum(["pending", "decided", "approved", "rejected", "timeout", "vanished"]);
export type ApprovalState = z.infer<typeof ApprovalState>;
export const OPEN_APPROVAL_STATES: readonly ApprovalState[] = ["pending", "decided"];
export const ApprovalSource = z.enum(["policy", "ask_approval"]);
export type ApprovalSource = z.infer<typeof ApprovalSource>;

export const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "must be a lower-case hex sha256");

/** A matched rule: a built-in or user rule id, `opaque.*` (the analysis could not see through; never grantable), or `model.ask` for `ask_approval`. */
export const RuleId = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "must be a rule id: lower-case letters, digits, '.', '_', '-' (≤ 64)");
export const OPAQUE_RULE_PREFIX = "opaque.";
export const ASK_RULE = "model.ask";
export const isOpaqueRule = (rule: string) => rule.startsWith(OPAQUE_RULE_PREFIX);
/** A call naming a path that asks in every mode (`~/.ssh`, rc files, the tokens): never grantable. */
export const PROTECTED_PATH_RULE = "protected-path";
/** The gate's built-in rules: what a request's `rules` may name besides user rules, and what the config may turn off or make grantable. */
export const BUILTIN_RULE_IDS = ["rm-rf", "sudo", "git-push-force", "git-reset-hard", "git-clean", "disk-write", "write-outside-project"] as const;
export type BuiltinRuleId = (typeof BUILTIN_RULE_IDS)[number];

/** An action as a code each side words in its own language: the extension never sends its own words for the server to show. */
export const ActionCode = z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, "must be an action code: lower-case letters, digits, '.', '_', '-' (≤ 64)");
/** The exact call an approval is for, beyond its session, runtime and run. */
export const ApprovalBinding = z.strictObject({
  tool_call_id: z.string().min(1).max(256),
  args_digest: Sha256Hex,
  cwd: z.string().min(1).max(APPROVAL_LIMITS.cwdChars),
});
export type ApprovalBinding = z.infer<typeof ApprovalBinding>;

/** The short code a person types: 5 letters, none that reads like a digit or another letter. */
export const CODE_ALPHABET = "ACDEFHJKMNPRTUVWXY";
export const ApprovalCode = z.string().regex(new RegExp(`^[${CODE_ALPHABET}]{5}$`), "must be a 5-letter approval code");

/** `POST /approvals` (agent token). */
export const ApprovalRequest = z.strictObject({
  approval_id: Id,
  session_id: Id,
  runtime_id: Id,
  run_id: Id,
  tool_call_id: z.string().min(1).max(256),
  tool: z.string().min(1).max(APPROVAL_LIMITS.toolChars),
  args_digest: Sha256Hex,
  cwd: z.string().min(1).max(APPROVAL_LIMITS.cwdChars),
  action: z.string().min(1).max(APPROVAL_LIMITS.actionChars),
  reason: z.string().max(APPROVAL_LIMITS.reasonChars),
  /** Exactly what will run, whole (only literal secret values masked); a longer one is refused, never cut. */
  command: z.string().min(1).max(APPROVAL_LIMITS.commandChars),
  /** From older clients that cut long commands: anything but 0 is refused (`command_incomplete`). */
  command_hidden_chars: z.number().int().min(0).default(0),
  /** The literal words of every simple command (`bash` only, every word a resolved literal); what a grant binds to. */
  argv: z
    .array(z.array(z.string().max(APPROVAL_LIMITS.commandChars)).min(1).max(APPROVAL_LIMITS.commandChars))
    .min(1)
    .max(APPROVAL_LIMITS.commandChars)
    .optional(),
  /** The OS user id Pi runs as (`process.getuid()`; absent where there is none): whether it could read the operator token. */
  agent_uid: z.number().int().min(0).max(0xffff_ffff).optional(),
  rules: z.array(RuleId).min(1).max(APPROVAL_LIMITS.rulesMax),
  /** Where each rule matched: the command or construct as written (cut to `siteChars`). Absent from older clients. */
  matched: z
    .array(z.strictObject({ rule: RuleId, at: z.string().max(APPROVAL_LIMITS.siteChars) }))
    .max(APPROVAL_LIMITS.rulesMax)
    .optional(),
  /** Ignored: the server alone decides what may be granted (`serverGrantable`); kept for older servers, which need it. */
  grantable: z.boolean(),
  source: ApprovalSource,
  /** What `action` is (`policy` requests), for each side to word; absent from older clients. */
  action_code: ActionCode.optional(),
  expires_at: Timestamp,
  created_at: Timestamp,
});
export type ApprovalRequest = z.infer<typeof ApprovalRequest>;

/** `POST /approvals/{approval_id}/resolution` (agent token): what actually happened to the call. */
export const ApprovalResolution = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  outcome: ApprovalOutcome,
  via: ApprovalVia,
  reason: z.string().max(APPROVAL_LIMITS.reasonChars).nullable(),
});
export type ApprovalResolution = z.infer<typeof ApprovalResolution>;

export const Approval = z.object({
  approval_id: Id,
  code: ApprovalCode,
  session_id: Id,
  tool: z.string(),
  action: z.string(),
  /** As requested; null when the request had none (an older client, or `ask_approval`). Absent from older servers. */
  action_code: z.string().nullable().default(null),
  reason: z.string(),
  command: z.string(),
  command_hidden_chars: z.number().int().min(0),
  rules: z.array(z.string()),
  /** Where each rule matched, as requested (redacted again); null without; absent from older servers. */
  matched: z
    .array(z.object({ rule: z.string(), at: z.string() }))
    .nullable()
    .default(null),
  grantable: z.boolean(),
  /** The server's display form of `command`: one line, controls visible, head and tail past `previewChars`. */
  preview: z.string(),
  cwd: z.string(),
  source: ApprovalSource,
  state: ApprovalState,
  decision: ApprovalDecision.nullable(),
  decided_by: z.string().nullable(),
  via: ApprovalVia.nullable(),
  created_at: Timestamp,
  expires_at: Timestamp,
  resolved_at: Timestamp.nullable(),
});
export type Approval = z.infer<typeof Approval>;
export const ApprovalAnswer = z.object({ approval: Approval });
/** How the owner is reached: `sent` in their chat; `queued` a chat is configured but not reached yet (retried while open); `none` nobody to send to (no
 * chat, or a grant decided at once): answer in the terminal or the console. */
export const ApprovalReach = z.enum(["sent", "queued", "none"]);
export type ApprovalReach = z.infer<typeof ApprovalReach>;

/** `POST /operator/approvals/{approval_id}/decision` (operator token). */
export const OperatorApprovalDecision = z.strictObject({
  decision: ApprovalDecision,
  reason: z.string().max(APPROVAL_LIMITS.reasonChars).optional(),
  binding: ApprovalBinding.optional(),
  /** With `approved`: also a standing grant of this exact call (same argv, same cwd) for its session, this many minutes. */
  grant_minutes: z.number().int().min(1).max(APPROVAL_LIMITS.grantMinutesMax).optional(),
  /** With `grant_minutes`: grant every call of its cwd starting with these words instead (the leading words of the approval's one simple command). */
  grant_prefix: z.array(z.string().max(4096)).min(1).max(64).optional(),
});

/** `GET /operator/approvals`: newest first; `open` = pending or decided. */
export const ApprovalListQuery = z.strictObject({
  state: z.enum(["open", "all"]).default("open"),
  session_id: Id.optional(),
  limit: z.coerce.number().int().min(1).max(APPROVAL_LIMITS.listMax).default(20),
});
export type ApprovalListQuery = z.infer<typeof ApprovalListQuery>;

export const ApprovalDecisionPayload = z.strictObject({
  approval_id: Id,
  decision: ApprovalDecision,
  reason: z.string().max(APPROVAL_LIMITS.reasonChars).nullable(),
  binding: ApprovalBinding,
  /** Where the person answered, for the terminal's note and the resolution. */
  via: PersonVia,
  /** Set when the owner's standing grant answered: the terminal says so, with its end. */
  grant: z.strictObject({ grant_id: Id, expires_at: Timestamp }).optional(),
});
export type ApprovalDecisionPayload = z.infer<typeof ApprovalDecisionPayload>;
/** How the client ACKs an `approval_decision`. */
export const ApprovalDecisionOutcome = z.enum(["applied", "already_answered", "mismatch", "unknown"]);
export type ApprovalDecisionOutcome = z.infer<typeof ApprovalDecisionOutcome>;

/** A standing grant: the owner approved one exact call for a while, so a later call of its session and cwd with the same argv (or the granted prefix, no
 * further word a path outside the project) is approved at once. Never for `opaque.*`, `ask_approval` or a call without argv. */
export const GrantId = z.string().regex(new RegExp(`^G[${CODE_ALPHABET}]{4}$`), "must be a grant id: G and 4 letters");
export const Grant = z.object({
  grant_id: GrantId,
  session_id: Id,
  rules: z.array(z.string()),
  /** What it covers: the exact simple commands, or (`prefix`) the leading words each must start with; null on grants made before binding (they cover nothing). */
  argv: z.array(z.array(z.string())).nullable(),
  prefix: z.boolean(),
  cwd: z.string(),
  approval_id: Id,
  created_by: z.string(),
  via: PersonVia,
  created_at: Timestamp,
  expires_at: Timestamp,
  revoked_at: Timestamp.nullable(),
  revoked_by: z.string().nullable(),
  uses: z.number().int().min(0),
});
export type Grant = z.infer<typeof Grant>;
/** `GET /operator/grants`: newest first; `live` = neither revoked nor expired. */
export const GrantListQuery = z.strictObject({
  state: z.enum(["live", "all"]).default("live"),
  session_id: Id.optional(),
  limit: z.coerce.number().int().min(1).max(APPROVAL_LIMITS.listMax).default(20),
});
export type GrantListQuery = z.infer<typeof GrantListQuery>;
