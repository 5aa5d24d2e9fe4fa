/**
 * Standing grants, decided purely: what the server may grant (never what it cannot see through,
 * never the model's own request), which live grant covers a new request, how long a grant runs,
 * and its revocation. A grant covers a request when it is of the same session, neither revoked nor
 * expired, and holds every rule the request matched.
 */
import { ASK_RULE, isOpaqueRule, type ApprovalSource, type Grant, type PersonVia } from "../../protocol/approvals.ts";
import type { ErrorCode } from "../../protocol/wire.ts";
import { pickCode } from "./decisions.ts";

export interface GrantRecord {
  seq: number;
  grant_id: string;
  session_id: string;
  rules: string[];
  approval_id: string;
  created_by: string;
  via: PersonVia;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
  revoked_by: string | null;
  uses: number;
}

/**
 * Whether the server may grant an approval's rules: the client must have said so (the user made
 * every matched rule grantable), and the server itself refuses `opaque.*` findings, `model.ask` and
 * `ask_approval` whatever the client said.
 */
export function serverGrantable(request: { grantable: boolean; source: ApprovalSource; rules: readonly string[] }): boolean {
  return (
    request.grantable && request.source === "policy" && request.rules.length > 0 && request.rules.every((rule) => !isOpaqueRule(rule) && rule !== ASK_RULE)
  );
}

export const isLiveGrant = (grant: Pick<GrantRecord, "revoked_at" | "expires_at">, now: Date) =>
  grant.revoked_at === null && now.getTime() < grant.expires_at.getTime();

/** The live grant that covers a request (the one running longest when several do), if the request may be granted at all. */
export function coveringGrant(
  grants: readonly GrantRecord[],
  request: { session_id: string; grantable: boolean; source: ApprovalSource; rules: readonly string[] },
  now: Date,
): GrantRecord | undefined {
  if (!serverGrantable(request)) return undefined;
  return grants
    .filter((grant) => grant.session_id === request.session_id && isLiveGrant(grant, now) && request.rules.every((rule) => grant.rules.includes(rule)))
    .sort((a, b) => b.expires_at.getTime() - a.expires_at.getTime())[0];
}

export type GrantDecision = { kind: "grant"; expiresAt: Date } | { kind: "refuse"; error: ErrorCode };

/** A grant asked for with an approval: only where the server may grant, for at most `maxMinutes`. */
export function decideGrant(
  approval: { grantable: boolean; source: ApprovalSource; rules: readonly string[] },
  minutes: number,
  maxMinutes: number,
  now: Date,
): GrantDecision {
  if (!serverGrantable(approval)) return { kind: "refuse", error: "not_grantable" };
  const bounded = Math.min(Math.max(1, Math.round(minutes)), maxMinutes);
  return { kind: "grant", expiresAt: new Date(now.getTime() + bounded * 60_000) };
}

export type RevokeDecision =
  | { kind: "apply"; patch: Pick<GrantRecord, "revoked_at" | "revoked_by"> }
  | { kind: "unchanged" }
  | { kind: "refuse"; error: ErrorCode };

/** Revoking a live grant ends it now; one already ended is left as it is. */
export function decideRevoke(grant: GrantRecord | undefined, by: string, now: Date): RevokeDecision {
  if (!grant) return { kind: "refuse", error: "not_found" };
  if (!isLiveGrant(grant, now)) return { kind: "unchanged" };
  return { kind: "apply", patch: { revoked_at: now, revoked_by: by } };
}

/** A grant id not taken yet: `G` and 4 letters of the approval codes' alphabet. */
export const pickGrantId = (random: (size: number) => number, taken: ReadonlySet<string>) => pickCode(random, taken, 64, "G", 4);

export function projectGrant(grant: GrantRecord): Grant {
  return {
    grant_id: grant.grant_id,
    session_id: grant.session_id,
    rules: grant.rules,
    approval_id: grant.approval_id,
    created_by: grant.created_by,
    via: grant.via,
    created_at: new Date(grant.created_at).toISOString(),
    expires_at: new Date(grant.expires_at).toISOString(),
    revoked_at: grant.revoked_at ? new Date(grant.revoked_at).toISOString() : null,
    revoked_by: grant.revoked_by,
    uses: grant.uses,
  };
}
