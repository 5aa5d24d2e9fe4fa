/** Standing grants, decided only here: what is grantable (literal argv, never opaque, never the model's own
 * request), which live grant covers a request, how long it runs, and its revocation. */
import { posix, win32 } from "node:path";
import { ASK_RULE, PROTECTED_PATH_RULE, isOpaqueRule, type ApprovalSource, Grant } from "../../protocol/approvals.ts";
import type { ErrorCode } from "../../protocol/wire.ts";
import type { WireIssue } from "../../common/domain-error.ts";
import { iso, pickCode } from "./decisions.ts";

/** A stored grant: what the operator sees (`Grant`, with dates as dates); `argv` null on grants made before binding covers nothing. */
export type GrantRecord = Omit<Grant, "created_at" | "expires_at" | "revoked_at"> & {
  seq: number;
  created_at: Date;
  expires_at: Date;
  revoked_at: Date | null;
};

/** What of a request or an approval grants are decided on. */
export interface Grantee {
  source: ApprovalSource;
  rules: readonly string[];
  argv?: readonly (readonly string[])[] | null | undefined;
  cwd: string;
}

/** Whether the server may grant (decided here alone, whatever the client said): a `policy` request whose every simple
 * command came as literal words (`argv`), with no `opaque.*` finding and no `model.ask`. */
export function serverGrantable(request: Grantee): boolean {
  return (
    request.source === "policy" &&
    request.rules.length > 0 &&
    request.rules.every((rule) => !isOpaqueRule(rule) && rule !== ASK_RULE && rule !== PROTECTED_PATH_RULE) &&
    !!request.argv &&
    request.argv.length > 0 &&
    request.argv.every((command) => command.length > 0)
  );
}

export const isLiveGrant = (grant: Pick<GrantRecord, "revoked_at" | "expires_at">, now: Date) =>
  grant.revoked_at === null && now.getTime() < grant.expires_at.getTime();

const pathsOf = (cwd: string) => (posix.isAbsolute(cwd) ? posix : win32);
const isRoot = (cwd: string) => {
  const paths = pathsOf(cwd);
  const resolved = paths.resolve(cwd);
  return paths.parse(resolved).root === resolved;
};

/** Whether a word (or what follows a `=`, `:` or `,` in it, or a short option's glued value `-C/etc`) names a path outside
 * `cwd`: `~…`, an absolute path elsewhere, a `..` escape. Any `$` or backquote counts as outside (fail closed). */
export function leavesProject(word: string, cwd: string): boolean {
  const paths = pathsOf(cwd);
  const candidates = [word, ...[...word.matchAll(/[=:,]/g)].map((m) => word.slice(m.index + 1))];
  const glued = /^-[A-Za-z](.+)$/.exec(word)?.[1];
  if (glued) candidates.push(glued);
  return candidates.some((candidate) => {
    if (candidate.startsWith("~") || /[$`]/.test(candidate)) return true;
    if (!paths.isAbsolute(candidate) && !candidate.split(/[\\/]/).includes("..")) return false;
    const rel = paths.relative(paths.resolve(cwd), paths.resolve(cwd, candidate));
    return rel.startsWith("..") || paths.isAbsolute(rel);
  });
}

const sameWords = (a: readonly string[], b: readonly string[]) => a.length === b.length && a.every((word, i) => word === b[i]);

/** Whether a grant's argv covers a request's: the same simple commands in order, or each starting with the prefix and nothing after it leaving the project. */
export function argvCovered(grant: Pick<GrantRecord, "argv" | "prefix" | "cwd">, argv: readonly (readonly string[])[]): boolean {
  if (!grant.argv || argv.length === 0) return false;
  if (!grant.prefix) return grant.argv.length === argv.length && grant.argv.every((command, i) => sameWords(command, argv[i]!));
  const [prefix] = grant.argv;
  if (!prefix || grant.argv.length !== 1) return false;
  return argv.every(
    (command) =>
      command.length >= prefix.length &&
      sameWords(command.slice(0, prefix.length), prefix) &&
      !command.slice(prefix.length).some((word) => leavesProject(word, grant.cwd)),
  );
}

/** The live grant that covers a request (the one running longest when several do); none for a request without `argv`. */
export function coveringGrant(grants: readonly GrantRecord[], request: Grantee & { session_id: string }, now: Date): GrantRecord | undefined {
  if (!serverGrantable(request) || !request.argv) return undefined;
  const argv = request.argv;
  return grants
    .filter(
      (grant) =>
        grant.session_id === request.session_id &&
        grant.cwd === request.cwd &&
        isLiveGrant(grant, now) &&
        request.rules.every((rule) => grant.rules.includes(rule)) &&
        argvCovered(grant, argv),
    )
    .sort((a, b) => b.expires_at.getTime() - a.expires_at.getTime())[0];
}

type GrantDecision = { kind: "grant"; expiresAt: Date; argv: string[][]; prefix: boolean } | { kind: "refuse"; error: ErrorCode; issues?: WireIssue[] };
const BAD_PREFIX: WireIssue[] = [{ path: "grant_prefix", message: "must be the leading words of the approval's one simple command" }];

/** A grant asked for with an approval: only where the server may grant, for at most `maxMinutes`; with a `prefix`, only for
 * one simple command that starts with it, never in the filesystem's root (no project for its paths to stay in). */
export function decideGrant(approval: Grantee, minutes: number, maxMinutes: number, now: Date, prefix?: readonly string[]): GrantDecision {
  if (!serverGrantable(approval) || !approval.argv) return { kind: "refuse", error: "not_grantable" };
  const argv = approval.argv.map((command) => [...command]);
  if (prefix) {
    const [only] = argv;
    if (argv.length !== 1 || !only || prefix.length === 0 || prefix.length > only.length || !sameWords(only.slice(0, prefix.length), prefix))
      return { kind: "refuse", error: "invalid_request", issues: BAD_PREFIX };
    if (isRoot(approval.cwd)) return { kind: "refuse", error: "not_grantable" };
  }
  const bounded = Math.min(Math.max(1, Math.round(minutes)), maxMinutes);
  return { kind: "grant", expiresAt: new Date(now.getTime() + bounded * 60_000), argv: prefix ? [[...prefix]] : argv, prefix: !!prefix };
}

/** Revoking a live grant ends it now; one already ended is left as it is. */
export function decideRevoke(
  grant: GrantRecord | undefined,
  by: string,
  now: Date,
): { kind: "apply"; patch: Pick<GrantRecord, "revoked_at" | "revoked_by"> } | { kind: "unchanged" } | { kind: "refuse"; error: ErrorCode } {
  if (!grant) return { kind: "refuse", error: "not_found" };
  if (!isLiveGrant(grant, now)) return { kind: "unchanged" };
  return { kind: "apply", patch: { revoked_at: now, revoked_by: by } };
}

/** A grant id not taken yet: `G` and 4 letters of the approval codes' alphabet. */
export const pickGrantId = (random: (size: number) => number, taken: ReadonlySet<string>) => pickCode(random, taken, 64, "G", 4);

const GRANT_KEYS = Grant.keyof().options;

export function projectGrant(grant: GrantRecord): Grant {
  const shown = Object.fromEntries(GRANT_KEYS.map((key) => [key, grant[key]])) as Grant;
  return { ...shown, created_at: iso(grant.created_at), expires_at: iso(grant.expires_at), revoked_at: grant.revoked_at ? iso(grant.revoked_at) : null };
}
