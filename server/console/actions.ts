/** What the console page may ask: named actions calling the same services as the API and the chat. Every
 * answer is a value, never thrown: the console would show a thrown error's stack. */
import { z } from "zod";
import { GrantId, OperatorApprovalDecision } from "../../protocol/approvals.ts";
import { CreateSessionBody } from "../../protocol/hosts.ts";
import { MuteBody, OperatorCreateCommand, UnmuteBody } from "../../protocol/operator.ts";
import { Id, wireIssues } from "../../protocol/wire.ts";
import type { GrantService } from "../approvals/grants.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { AuditLog } from "../audit/store.ts";
import type { StartService } from "../hosts/service.ts";
import { DomainError, type WireIssue } from "../../common/domain-error.ts";
import type { OperatorService } from "../operator/service.ts";
import { record } from "./run-rules.ts";

/** A refusal's `state` is the approval's state now, with `already_decided` and `approval_expired`. */
export type ConsoleAnswer<T = unknown> = { ok: true; value: T } | { ok: false; error: string; issues?: WireIssue[]; state?: string };

/** How long a stop waits for the session's ACK before the page gets the command as it stands. */
const STOP_WAIT_MS = 10_000;

export interface ConsoleActionDeps {
  operator: OperatorService;
  approvals: ApprovalService;
  grants: GrantService;
  starts: StartService;
}

type ConsoleAction<I extends z.ZodType = z.ZodType> = { input: I; run(deps: ConsoleActionDeps, input: z.infer<I>, caller: string): Promise<unknown> };
const action = <I extends z.ZodType>(input: I, run: ConsoleAction<I>["run"]): ConsoleAction<I> => ({ input, run });

/** By their listeners' names on the console's WebSocket. */
export const CONSOLE_ACTIONS: Record<string, ConsoleAction> = {
  // The page makes one key per submit, so a repeated submit (a reconnect, a double click) queues once.
  "anon-notify/send": action(OperatorCreateCommand, ({ operator }, input) =>
    operator.createCommand({ ...input, request_key: input.request_key === undefined ? null : `console:${input.request_key}`, origin: "operator" }),
  ),
  "anon-notify/cancel": action(z.strictObject({ session_id: Id, command_id: Id }), ({ operator }, input) =>
    operator.cancel(input.session_id, input.command_id),
  ),
  // The page shows what the session did (stopped, already idle), so the answer waits for the ACK, bounded.
  "anon-notify/stop": action(z.strictObject({ session_id: Id }), async ({ operator }, input) => {
    const stop = await operator.requestStop(input.session_id, "console");
    return operator.waitForCommandOutcome(stop.command_id, STOP_WAIT_MS);
  }),
  "anon-notify/mute": action(MuteBody, async ({ operator }, input) => ({ mute: await operator.mute(input.session_id ?? null, input.minutes) })),
  "anon-notify/unmute": action(UnmuteBody, async ({ operator }, input) => ({ ended: await operator.unmute(input.session_id ?? null) })),
  // With `grant_minutes` (only `approved`): approve, and grant this exact call (or `grant_prefix`) to its session for that long.
  "anon-notify/decide": action(OperatorApprovalDecision.extend({ approval_id: Id }), ({ approvals }, input, caller) =>
    approvals.decide({ ...input, ref: input.approval_id, decider: { actor: "console", name: caller }, via: "console" }),
  ),
  // As `POST /operator/sessions`: a host's refusal is a refusal, its reason in `state`.
  "anon-notify/new-session": action(CreateSessionBody, async ({ starts }, input) => {
    const result = await starts.start(input, "console");
    if (result.state === "refused") throw new DomainError("start_refused", { state: result.refusal });
    return result;
  }),
  "anon-notify/revoke": action(z.strictObject({ grant_id: GrantId }), ({ grants }, input, caller) =>
    grants.revoke(input.grant_id, { actor: "console", name: caller }),
  ),
};

/** Parses, runs and turns every failure into an answer. */
export async function answer<I extends z.ZodType>(input: I, raw: unknown, run: (value: z.infer<I>) => Promise<unknown>): Promise<ConsoleAnswer> {
  const parsed = input.safeParse(raw);
  if (!parsed.success) return { ok: false, error: "invalid_request", issues: wireIssues(parsed.error) };
  try {
    return { ok: true, value: await run(parsed.data) };
  } catch (error) {
    if (!(error instanceof DomainError)) throw error;
    return { ok: false, error: error.code, ...(error.issues ? { issues: error.issues } : {}), ...(error.state ? { state: error.state } : {}) };
  }
}

/** One audit row per console action, with what was asked (images as digests) and how it ended. */
export async function auditAction(audit: AuditLog, name: string, input: unknown, result: ConsoleAnswer, who: Record<string, unknown>): Promise<void> {
  const fields = record(input);
  // A send answers `{command}`, a stop the command itself, a decision `{approval}` and a revocation `{grant}` (whose session the input does not name).
  const value = record(result.ok ? result.value : undefined);
  const sessionId = Id.safeParse(fields.session_id ?? record(value.approval).session_id ?? record(value.grant).session_id);
  const subject = [fields.command_id, fields.approval_id, fields.grant_id, record(value.command).command_id, value.command_id].find(
    (item): item is string => typeof item === "string",
  );
  await audit.record({
    actor: "console",
    action: `console.${name.slice(name.indexOf("/") + 1)}`,
    session_id: sessionId.success ? sessionId.data : null,
    subject: subject ?? null,
    data: { input, status: result.ok ? "ok" : "refused", error: result.ok ? null : result.error, client: who },
  });
}
