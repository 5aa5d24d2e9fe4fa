/** ApprovalService, for every surface: the agent requests and resolves, only the owner decides (first
 * conditional write on `pending` wins, then an `approval_decision` control command); every step is audited. */
import { randomInt } from "node:crypto";
import type { z } from "zod";
import { commandPreview } from "../../common/command-text.ts";
import { redactSecrets } from "../../common/redact.ts";
import {
  APPROVAL_LIMITS,
  OPEN_APPROVAL_STATES,
  type Approval,
  type ApprovalDecisionPayload,
  type ApprovalListQuery,
  type ApprovalRequest,
  type ApprovalResolution,
  type Grant,
  type OperatorApprovalDecision,
  type PersonVia,
} from "../../protocol/approvals.ts";
import type { AuditActor } from "../../protocol/audit.ts";
import type { AuditLog } from "../audit/store.ts";
import { errorText } from "../../common/errors.ts";
import { DomainError } from "../../common/domain-error.ts";
import { fullBucket, type Bucket } from "../rate-limit-rules.ts";
import {
  bindingOf,
  decideAdmission,
  decideDecision,
  decideExpiry,
  decideResolution,
  decideUndo,
  decideVanish,
  iso,
  operatorDecisionRefusal,
  pickCode,
  project,
  requestDigest,
  UNDECIDED,
  type ApprovalLimits,
  type ApprovalRecord,
  type Decider,
  type Transition,
} from "./decisions.ts";
import { serverGrantable, type GrantRecord } from "./grant-rules.ts";
import type { GrantService } from "./grants.ts";
import type { ApprovalStore } from "./store.ts";
import { Turns } from "../../common/turns.ts";

export interface ApprovalServiceDeps {
  store: ApprovalStore;
  audit: AuditLog;
  /** The commands store's control lane, as far as approvals use it. */
  control: { createControlCommand(sessionId: string, kind: "approval_decision", payload: ApprovalDecisionPayload, actor: AuditActor): Promise<unknown> };
  /** Called after every change that may owe the owner a message. */
  changed(): void;
  /** Whether this runtime is the session's current, online one (the heartbeat registry). */
  isLive(sessionId: string, runtimeId: string): boolean;
  /** How long after start the (memory only) registry may not know a live runtime yet: until then the sweep does not judge liveness. */
  presenceGraceMs: number;
  limits: ApprovalLimits;
  grants: GrantService;
  /** Decisions through the operator API: opted in (`approvalOperatorDecisions`), and the server's own OS user id. */
  operatorDecisions: { optedIn: boolean; serverUid: number | undefined };
  random?: (size: number) => number;
  now?: () => Date;
}

/** How long after `expires_at` the server closes an approval the agent never resolved. */
export const EXPIRY_GRACE_MS = 60_000;
const CODE_PATTERN = /^[A-Za-z]{5}$/;

/** A new approval nobody has answered yet: the owner is owed the request and a mention. */
const PENDING_FIELDS = { ...UNDECIDED, request_sent: false, request_held: false, persona_mentioned: false, grant_id: null, grant_use: null } as const;

/** A new approval a standing grant answered at once: nothing to ask, only the closing message is owed. */
const grantedFields = (grant: GrantRecord, use: number, now: Date) =>
  ({
    ...PENDING_FIELDS,
    state: "decided",
    decision: "approved",
    decided_by: grant.created_by,
    via: grant.via,
    decided_at: now,
    request_sent: true,
    persona_mentioned: true,
    grant_id: grant.grant_id,
    grant_use: use,
  }) as const satisfies Partial<ApprovalRecord>;

/** A person's answer to an approval (`ref`: its id or code), optionally with a standing grant. */
export type PersonDecision = Omit<z.infer<typeof OperatorApprovalDecision>, "reason" | "grant_prefix"> & {
  ref: string;
  decider: Decider;
  via: PersonVia;
  reason?: string | null | undefined;
  grant_prefix?: readonly string[] | undefined;
};

export class ApprovalService {
  readonly #deps: ApprovalServiceDeps;
  /** One turn for all requests (one key): the code stays unique and the open cap holds until the insert lands. */
  readonly #creations = new Turns();
  /** Sessions that may have open approvals (a superset, so sessions without any cost no database read); undefined until `load`. */
  #mayHaveOpen: Set<string> | undefined;
  /** Each session's request bucket; dropped when the session goes away. */
  readonly #buckets = new Map<string, Bucket>();
  readonly #startedAtMs: number;

  constructor(deps: ApprovalServiceDeps) {
    this.#deps = deps;
    this.#startedAtMs = this.#now().getTime();
  }

  #now(): Date {
    return this.#deps.now?.() ?? new Date();
  }

  #audit(actor: AuditActor, action: string, record: { session_id: string; approval_id: string }, data: Record<string, unknown>, subject = record.approval_id) {
    return this.#deps.audit.record({ actor, action, session_id: record.session_id, subject, data });
  }

  /** Reads which sessions have open approvals (at start). */
  async load(): Promise<void> {
    const open = await this.#deps.store.openFor({});
    this.#mayHaveOpen = new Set([...(this.#mayHaveOpen ?? []), ...open.map((row) => row.session_id)]);
  }

  /** Stores the request with a code unique among open approvals; a repeat (same id and body) or another request for the
   * same call returns the stored one. A new one must come from the session's live runtime, within its limits. */
  request(body: ApprovalRequest): Promise<{ approval: Approval; created: boolean }> {
    return this.#creations.run("create", async () => {
      const { store, limits } = this.#deps;
      const digest = requestDigest(body);
      // The owner answers for all of it or none: a command the client cut is never stored in part.
      if (body.command_hidden_chars > 0) throw new DomainError("command_incomplete");
      const existing = await store.get(body.approval_id);
      if (existing && existing.request_digest !== digest) throw new DomainError("idempotency_key_reused");
      if (existing) return { approval: project(existing), created: false };
      const same = await store.byCall(body.session_id, body.tool_call_id, body.args_digest);
      if (same) return { approval: project(same), created: false };
      const now = this.#now();
      const admission = decideAdmission(
        {
          live: this.#deps.isLive(body.session_id, body.runtime_id),
          open: (await store.openFor({ sessionId: body.session_id })).length,
          bucket: this.#buckets.get(body.session_id) ?? fullBucket(limits.rate, now.getTime()),
          requestedExpiry: new Date(body.expires_at),
          now,
        },
        limits,
      );
      if (admission.kind === "refuse") {
        if (admission.error !== "session_offline") this.#buckets.set(body.session_id, admission.bucket);
        throw new DomainError(admission.error, admission.retryAfterSeconds === undefined ? {} : { retryAfterSeconds: admission.retryAfterSeconds });
      }
      this.#buckets.set(body.session_id, admission.bucket);
      this.#mayHaveOpen?.add(body.session_id);
      const code = pickCode(this.#deps.random ?? randomInt, await store.openCodes());
      // What may be granted is the server's decision alone, whatever the client said.
      const grantable = serverGrantable(body);
      const granted = await this.#deps.grants.use(body);
      const record = await store.create({
        ...body,
        matched: body.matched?.map(({ rule, at }) => ({ rule, at: redactSecrets(at) })) ?? null,
        argv: body.argv ?? null,
        agent_uid: body.agent_uid ?? null,
        action_code: body.source === "policy" ? (body.action_code ?? null) : null,
        grantable,
        command: redactSecrets(body.command),
        preview: commandPreview(redactSecrets(body.command), APPROVAL_LIMITS.previewChars).text,
        code,
        request_digest: digest,
        ...(granted ? grantedFields(granted.grant, granted.use, now) : PENDING_FIELDS),
        outcome_reason: null,
        created_at: new Date(body.created_at),
        expires_at: admission.expiresAt,
        resolved_at: null,
        request_message_id: null,
        closing_sent: false,
      });
      await this.#audit("agent", "approval.requested", record, { ...body, code });
      if (granted) await this.#sendGranted(record, granted.grant);
      this.#deps.changed();
      return { approval: project((await store.get(record.approval_id)) ?? record), created: true };
    });
  }

  /** A grant's decision goes to the waiting runtime; if it cannot be queued, a person is asked after all. */
  async #sendGranted(record: ApprovalRecord, grant: GrantRecord): Promise<void> {
    const granted = { grant_id: grant.grant_id, expires_at: iso(grant.expires_at) };
    try {
      await this.#queueDecision(record, "server", { decision: "approved", reason: null, via: grant.via, grant: granted });
    } catch (error) {
      await this.#deps.store.transition(record.approval_id, (r) => decideUndo(r, PENDING_FIELDS));
      return this.#audit("server", "grant.unused", record, { code: record.code, error: errorText(error) }, grant.grant_id);
    }
    const { code, grant_use: use, rules, argv, cwd } = record;
    await this.#audit("server", "approval.granted", record, { code, grant_id: grant.grant_id, use, rules, argv, cwd });
  }

  #queueDecision(record: ApprovalRecord, actor: AuditActor, decision: Omit<ApprovalDecisionPayload, "approval_id" | "binding">) {
    const payload = { approval_id: record.approval_id, binding: bindingOf(record), ...decision };
    return this.#deps.control.createControlCommand(record.session_id, "approval_decision", payload, actor);
  }

  /** The agent's word on what happened to the call; idempotent. */
  async resolve(approvalId: string, body: ApprovalResolution): Promise<Approval> {
    const { record, changed } = await this.#deps.store.transition(approvalId, (r) => decideResolution(r, body, this.#now()));
    if (changed) {
      await this.#audit("agent", "approval.resolved", record, { ...body, code: record.code }, approvalId);
      this.#deps.changed();
    }
    return project(record);
  }

  /** A person's decision (never the persona's) by approval id or code; each refusal is audited. With `grant_minutes` it
   * also grants the call (or `grant_prefix`), checked before deciding. */
  async decide(request: PersonDecision): Promise<{ approval: Approval; grant?: Grant }> {
    const { grant_minutes: minutes, grant_prefix: prefix } = request;
    if (minutes === undefined && prefix !== undefined)
      throw new DomainError("invalid_request", { issues: [{ path: "grant_prefix", message: "only with grant_minutes" }] });
    if (minutes === undefined) return { approval: project(await this.#decide(request)) };
    if (request.decision !== "approved")
      throw new DomainError("invalid_request", { issues: [{ path: "grant_minutes", message: "only with decision approved" }] });
    const { grants } = this.#deps;
    const record = await this.#decide(request, (found) => grants.check(found, minutes, prefix));
    return { approval: project(record), grant: await grants.create(record, minutes, request.decider, request.via, prefix) };
  }

  async #decide({ ref, decision, decider, via, reason = null, binding }: PersonDecision, precheck?: (found: ApprovalRecord) => void): Promise<ApprovalRecord> {
    const { store } = this.#deps;
    const found = await this.#lookup(ref);
    const refused = async (error: DomainError) => {
      const data = { decision, by: decider.name, via, error: error.code, state: error.state ?? null };
      const about = { session_id: found?.session_id ?? null, subject: found?.approval_id ?? ref };
      await this.#deps.audit.record({ actor: decider.actor, action: "approval.refused", ...about, data });
      return error;
    };
    if (decider.actor === "persona") throw await refused(new DomainError("unauthorized"));
    if (!found) throw await refused(new DomainError("not_found"));
    if (via === "operator") {
      const refusal = operatorDecisionRefusal({ ...this.#deps.operatorDecisions, agentUid: found.agent_uid });
      if (refusal) throw await refused(new DomainError(refusal));
    }
    const input = { decision, reason, decidedBy: decider.name, via, binding };
    let record: ApprovalRecord;
    try {
      precheck?.(found);
      ({ record } = await store.transition(found.approval_id, (r) => decideDecision(r, input, this.#now())));
    } catch (error) {
      throw error instanceof DomainError ? await refused(error) : error;
    }
    try {
      await this.#queueDecision(record, decider.actor, { decision, reason, via });
    } catch (error) {
      await store.transition(record.approval_id, (r) => decideUndo(r));
      throw error;
    }
    await this.#audit(decider.actor, "approval.decided", record, { code: record.code, decision, reason, by: decider.name, via });
    this.#deps.changed();
    return record;
  }

  /** An approval by id or code, as `decide` finds it (a code names the newest approval that had it). */
  find(ref: string): Promise<Approval | undefined> {
    return this.#lookup(ref).then((record) => record && project(record));
  }

  #lookup(ref: string): Promise<ApprovalRecord | undefined> {
    return CODE_PATTERN.test(ref.trim()) ? this.#deps.store.byCode(ref.trim().toUpperCase()) : this.#deps.store.get(ref);
  }

  async list(query: ApprovalListQuery): Promise<Approval[]> {
    const states = query.state === "open" ? OPEN_APPROVAL_STATES : undefined;
    return (await this.#deps.store.list({ states, sessionId: query.session_id, limit: query.limit })).map(project);
  }

  /** One page of the approvals nobody has answered yet, newest first, and how many there are in all. */
  async pendingPage(page: number, size: number): Promise<{ approvals: Approval[]; total: number }> {
    const { store } = this.#deps;
    const rows = await store.list({ states: ["pending"], limit: size, offset: (page - 1) * size });
    return { approvals: rows.map(project), total: await store.count(["pending"]) };
  }

  byRequestMessage(messageId: string): Promise<Approval | undefined> {
    return this.#deps.store.byRequestMessage(messageId).then((record) => record && project(record));
  }

  /** A session's runtime went away (offline, expired, replaced): its open approvals can no longer be answered. */
  async vanish(sessionId: string, keepRuntime?: string): Promise<void> {
    if (this.#mayHaveOpen && !this.#mayHaveOpen.has(sessionId)) return;
    const open = await this.#deps.store.openFor({ sessionId, ...(keepRuntime ? { notRuntime: keepRuntime } : {}) });
    if (!keepRuntime) this.#buckets.delete(sessionId);
    if (open.length === 0 && !keepRuntime) this.#mayHaveOpen?.delete(sessionId);
    for (const row of open) await this.#close(row, "approval.vanished", (r) => decideVanish(r, this.#now()));
  }

  /** Approvals past their time whose agent never said: timed out; open ones whose runtime is not online: vanished. */
  async sweep(): Promise<void> {
    const now = this.#now();
    const judgeLiveness = now.getTime() - this.#startedAtMs >= this.#deps.presenceGraceMs;
    for (const row of await this.#deps.store.openFor({})) {
      if (decideExpiry(row, now, EXPIRY_GRACE_MS).kind === "apply")
        await this.#close(row, "approval.expired", (r) => decideExpiry(r, this.#now(), EXPIRY_GRACE_MS));
      else if (judgeLiveness && !this.#deps.isLive(row.session_id, row.runtime_id))
        await this.#close(row, "approval.vanished", (r) => decideVanish(r, this.#now()));
    }
  }

  async #close(row: ApprovalRecord, action: string, decide: (r: ApprovalRecord) => Transition): Promise<void> {
    const { record, changed } = await this.#deps.store.transition(row.approval_id, (r) => (r ? decide(r) : { kind: "unchanged" }));
    if (!changed) return;
    await this.#audit("server", action, record, { code: record.code, state: record.state });
    this.#deps.changed();
  }
}
