/** GrantService, for every surface: a grant is made only by a person, from an approval the server finds
 * grantable, for a bounded time; each use is counted and audited. */
import { randomInt } from "node:crypto";
import type { ApprovalRequest, Grant, GrantListQuery, PersonVia } from "../../protocol/approvals.ts";
import type { AuditLog } from "../audit/store.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { ApprovalRecord, Decider } from "./decisions.ts";
import { coveringGrant, decideGrant, decideRevoke, pickGrantId, projectGrant, type GrantRecord, type Grantee } from "./grant-rules.ts";
import type { GrantStore } from "./grant-store.ts";

export interface GrantServiceDeps {
  store: GrantStore;
  audit: AuditLog;
  maxMinutes: number;
  random?: (size: number) => number;
  now?: () => Date;
}

export class GrantService {
  readonly #deps: GrantServiceDeps;

  constructor(deps: GrantServiceDeps) {
    this.#deps = deps;
  }

  #now(): Date {
    return this.#deps.now?.() ?? new Date();
  }

  /** Refuses (`not_grantable`, or `invalid_request` for a prefix the call does not start with) before anything is decided. */
  check(approval: Grantee, minutes: number, prefix?: readonly string[], now = this.#now()) {
    const decision = decideGrant(approval, minutes, this.#deps.maxMinutes, now, prefix);
    if (decision.kind === "refuse") throw new DomainError(decision.error, decision.issues ? { issues: decision.issues } : {});
    return decision;
  }

  /** The grant of an approval the owner just approved with `minutes` (and, to cover every call starting so, `prefix`). */
  async create(approval: ApprovalRecord, minutes: number, decider: Decider, via: PersonVia, prefix?: readonly string[]): Promise<Grant> {
    const { store, audit } = this.#deps;
    const now = this.#now();
    const decision = this.check(approval, minutes, prefix, now);
    const grant = await store.create({
      grant_id: pickGrantId(this.#deps.random ?? randomInt, await store.ids()),
      session_id: approval.session_id,
      rules: approval.rules,
      argv: decision.argv,
      prefix: decision.prefix,
      cwd: approval.cwd,
      approval_id: approval.approval_id,
      created_by: decider.name,
      via,
      created_at: now,
      expires_at: decision.expiresAt,
      revoked_at: null,
      revoked_by: null,
      uses: 0,
    });
    const shown = projectGrant(grant);
    await audit.record({
      actor: decider.actor,
      action: "grant.created",
      session_id: grant.session_id,
      subject: grant.grant_id,
      data: { ...shown, code: approval.code },
    });
    return shown;
  }

  /** The live grant that covers a new request, with this use already counted; undefined when none does (or it just ended). */
  async use(request: ApprovalRequest): Promise<{ grant: GrantRecord; use: number } | undefined> {
    const now = this.#now();
    const grant = coveringGrant(await this.#deps.store.live(now, request.session_id), request, now);
    if (!grant || !(await this.#deps.store.use(grant.grant_id, grant.uses, now))) return undefined;
    return { grant, use: grant.uses + 1 };
  }

  async list(query: GrantListQuery): Promise<Grant[]> {
    const rows = await this.#deps.store.list({ ...(query.state === "live" ? { live: this.#now() } : {}), sessionId: query.session_id, limit: query.limit });
    return rows.map(projectGrant);
  }

  /** Ends a grant now (`revoked: true`); one already ended is answered as it is (`revoked: false`). Only a person may revoke. */
  async revoke(grantId: string, decider: Decider): Promise<{ grant: Grant; revoked: boolean }> {
    const { store, audit } = this.#deps;
    if (decider.actor === "persona") throw new DomainError("unauthorized");
    const id = grantId.trim().toUpperCase();
    const grant = await store.get(id);
    const decision = decideRevoke(grant, decider.name, this.#now());
    if (decision.kind === "refuse") throw new DomainError(decision.error);
    const revoked = decision.kind === "apply" && (await store.revoke(id, decision.patch));
    const data = { by: decider.name, uses: grant!.uses };
    if (revoked) await audit.record({ actor: decider.actor, action: "grant.revoked", session_id: grant!.session_id, subject: id, data });
    return { grant: projectGrant((await store.get(id))!), revoked };
  }
}
