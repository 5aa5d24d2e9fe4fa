/** Approval transitions: requests, a person's decision (first wins), the agent's resolution, vanishing and
 * expiry. Each names the state it was decided on; the store writes it only if the row is still there. */
import { createHash } from "node:crypto";
import {
  CODE_ALPHABET,
  OPEN_APPROVAL_STATES,
  Approval,
  type ApprovalBinding,
  type ApprovalDecision,
  type ApprovalRequest,
  type ApprovalResolution,
  type ApprovalState,
  type PersonVia,
} from "../../protocol/approvals.ts";
import type { AuditActor } from "../../protocol/audit.ts";
import type { ErrorCode } from "../../protocol/wire.ts";
import { takeToken, type Bucket, type RateLimit } from "../rate-limit-rules.ts";

/** A stored approval: what the owner sees (`Approval`, with dates as dates) and the server's own book-keeping. */
export type ApprovalRecord = Omit<Approval, "created_at" | "expires_at" | "resolved_at"> & {
  seq: number;
  runtime_id: string;
  run_id: string;
  tool_call_id: string;
  args_digest: string;
  /** The literal words of every simple command, as the client sent them; null when it could not (what a grant binds to). */
  argv: string[][] | null;
  /** The OS user id Pi said it runs as; null when it did not say. */
  agent_uid: number | null;
  request_digest: string;
  decision_reason: string | null;
  outcome_reason: string | null;
  created_at: Date;
  expires_at: Date;
  decided_at: Date | null;
  resolved_at: Date | null;
  /** The owner's copy of the request: its platform message id once sent (quote replies answer it). */
  request_message_id: string | null;
  request_sent: boolean;
  /** Its request was not sent on its own (past the owner's message cap): a digest counts it instead. */
  request_held: boolean;
  persona_mentioned: boolean;
  closing_sent: boolean;
  /** The standing grant that approved it at once, and which use of it this was; null when a person answered. */
  grant_id: string | null;
  grant_use: number | null;
};

/** Who decides: the audit actor and a name for the record (`operator`, `chat:onebot:10001`). */
export type Decider = { actor: AuditActor; name: string };

export type ApprovalPatch = Partial<Omit<ApprovalRecord, "seq" | "approval_id">>;

export type Transition =
  | { kind: "apply"; from: ApprovalState; patch: ApprovalPatch }
  | { kind: "unchanged" }
  | { kind: "refuse"; error: ErrorCode; state?: ApprovalState };

export const isOpen = (state: ApprovalState) => OPEN_APPROVAL_STATES.includes(state);

/** The digest that tells a repeat of a request from another body under the same id. */
export function requestDigest(body: ApprovalRequest): string {
  const ordered = Object.keys(body)
    .sort()
    .map((key) => [key, body[key as keyof ApprovalRequest]]);
  return createHash("sha256").update(JSON.stringify(ordered)).digest("hex");
}

/** How much one session may ask of the owner: time, open requests, requests per minute. */
export interface ApprovalLimits {
  /** The longest an approval may stay open, from when the server took it. */
  maxOpenMs: number;
  openPerSession: number;
  rate: RateLimit;
}

/** Whether a new request may reach the owner: only from the session's live runtime, within the open and per-minute
 * limits (a refusal for the open limit spends no token); never open longer than the server's maximum. */
export function decideAdmission(
  input: { live: boolean; open: number; bucket: Bucket; requestedExpiry: Date; now: Date },
  limits: ApprovalLimits,
): { kind: "admit"; expiresAt: Date; bucket: Bucket } | { kind: "refuse"; error: ErrorCode; retryAfterSeconds?: number; bucket: Bucket } {
  const { bucket, now } = input;
  if (!input.live) return { kind: "refuse", error: "session_offline", bucket };
  if (input.open >= limits.openPerSession) return { kind: "refuse", error: "too_many_approvals", retryAfterSeconds: 5, bucket };
  const take = takeToken(bucket, now.getTime(), limits.rate);
  if (!take.allowed) return { kind: "refuse", error: "rate_limited", retryAfterSeconds: take.retryAfterSeconds, bucket: take.bucket };
  const cap = now.getTime() + limits.maxOpenMs;
  return { kind: "admit", expiresAt: new Date(Math.min(input.requestedExpiry.getTime(), cap)), bucket: take.bucket };
}

/** A code not used by any open approval (or, with `prefix` and `letters`, another id people type, e.g. a grant's). */
export function pickCode(random: (size: number) => number, taken: ReadonlySet<string>, attempts = 64, prefix = "", letters = 5): string {
  for (let attempt = 0; attempt < attempts; attempt++) {
    let code = prefix;
    for (let i = 0; i < letters; i++) code += CODE_ALPHABET[random(CODE_ALPHABET.length)];
    if (!taken.has(code)) return code;
  }
  throw new Error(`no free ${prefix ? "id" : "approval code"}`);
}

/** A person's decision: the first one on a pending, unexpired approval with a matching binding wins. */
export function decideDecision(
  record: ApprovalRecord | undefined,
  input: { decision: ApprovalDecision; reason: string | null; decidedBy: string; via: PersonVia; binding?: ApprovalBinding | undefined },
  now: Date,
): Transition {
  if (!record) return { kind: "refuse", error: "not_found" };
  if (record.state === "timeout" || record.state === "vanished") return { kind: "refuse", error: "approval_expired", state: record.state };
  if (record.state !== "pending") return { kind: "refuse", error: "already_decided", state: record.state };
  if (now.getTime() >= record.expires_at.getTime()) return { kind: "refuse", error: "approval_expired", state: record.state };
  if (input.binding && !bindingMatches(record, input.binding)) return { kind: "refuse", error: "approval_mismatch" };
  return {
    kind: "apply",
    from: "pending",
    patch: { state: "decided", decision: input.decision, decision_reason: input.reason, decided_by: input.decidedBy, via: input.via, decided_at: now },
  };
}

export const UNDECIDED = { state: "pending", decision: null, decision_reason: null, decided_by: null, via: null, decided_at: null } as const;

/** A decision whose control command could not be queued is taken back, so a person can answer again. */
export function decideUndo(record: ApprovalRecord | undefined, patch: ApprovalPatch = UNDECIDED): Transition {
  return record?.state === "decided" ? { kind: "apply", from: "decided", patch } : { kind: "unchanged" };
}

export const bindingOf = (record: ApprovalRecord): ApprovalBinding => ({ tool_call_id: record.tool_call_id, args_digest: record.args_digest, cwd: record.cwd });

function bindingMatches(record: ApprovalRecord, binding: ApprovalBinding): boolean {
  return record.tool_call_id === binding.tool_call_id && record.args_digest === binding.args_digest && record.cwd === binding.cwd;
}

/** The agent's word on the call, the record's source of truth: it closes an open approval and corrects `vanished`
 * (the session came back and answered); a repeat changes nothing. */
export function decideResolution(record: ApprovalRecord | undefined, body: ApprovalResolution, now: Date): Transition {
  if (!record || record.session_id !== body.session_id || record.runtime_id !== body.runtime_id) return { kind: "refuse", error: "not_found" };
  if (record.state !== "pending" && record.state !== "decided" && record.state !== "vanished") return { kind: "unchanged" };
  const person = body.via === "chat" || body.via === "operator" || body.via === "console" || body.via === "ntfy";
  return {
    kind: "apply",
    from: record.state,
    patch: {
      state: body.outcome,
      via: body.via,
      outcome_reason: body.reason,
      decided_by: body.via === "terminal" ? "terminal" : person ? record.decided_by : null,
      decision: body.outcome === "timeout" ? record.decision : body.outcome,
      resolved_at: now,
    },
  };
}

export function decideVanish(record: ApprovalRecord, now: Date): Transition {
  return isOpen(record.state) ? { kind: "apply", from: record.state, patch: { state: "vanished", resolved_at: now } } : { kind: "unchanged" };
}

/** Past its time by more than `graceMs` and the agent never said: the server closes it as timed out. */
export function decideExpiry(record: ApprovalRecord, now: Date, graceMs: number): Transition {
  if (!isOpen(record.state) || now.getTime() < record.expires_at.getTime() + graceMs) return { kind: "unchanged" };
  return { kind: "apply", from: record.state, patch: { state: "timeout", via: "timeout", resolved_at: now } };
}

/** What the owner still has to be sent, in order; without a chat no request is owed (nor retried), only the persona's mention. Pure. */
export type Outgoing = "request" | "mention" | "closing" | "skip_closing";
export function nextOutgoing(record: ApprovalRecord, personaPresent: boolean, chat: boolean): Outgoing | undefined {
  if (isOpen(record.state) && !record.request_sent && !record.request_held && chat) return "request";
  if (isOpen(record.state) && personaPresent && !record.persona_mentioned) return "mention";
  if (!isOpen(record.state) && !record.closing_sent) return record.request_sent ? "closing" : "skip_closing";
  return undefined;
}

const APPROVAL_KEYS = Approval.keyof().options;
export const iso = (date: Date) => new Date(date).toISOString();

export function project(record: ApprovalRecord): Approval {
  const shown = Object.fromEntries(APPROVAL_KEYS.map((key) => [key, record[key]])) as Approval;
  return { ...shown, created_at: iso(record.created_at), expires_at: iso(record.expires_at), resolved_at: record.resolved_at ? iso(record.resolved_at) : null };
}

/** Whether the operator API may decide: an agent running as the server's user (or root) could read its token, so it is
 * opt-in and refused for a Pi that says it runs as either; for one that does not say, the opt-in is the operator's word. */
export function operatorDecisionRefusal(facts: { optedIn: boolean; serverUid: number | undefined; agentUid: number | null }): ErrorCode | undefined {
  if (!facts.optedIn) return "operator_decisions_off";
  if (facts.agentUid !== null && (facts.agentUid === 0 || facts.agentUid === facts.serverUid)) return "operator_token_reachable";
  return undefined;
}
