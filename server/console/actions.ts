/**
 * What the console page may ask of the server: one table of named actions, each an input schema
 * and a call into the same operator service the HTTP API and the persona's tools use, so the page
 * gets the same rules, the same refusals and the same audit rows. Answering an approval and
 * muting join this table when their services exist.
 *
 * Every answer is a value, never a thrown error: the console would turn a thrown error into its
 * stack trace, and the page must show the server's reason (`error` is a protocol error code, or
 * one of the console's own refusals below).
 */
import { z } from "zod";
import { AuditQuery, type AuditEntry } from "../../protocol/audit.ts";
import { OperatorCreateCommand } from "../../protocol/operator.ts";
import { Id, wireIssues } from "../../protocol/wire.ts";
import type { AuditLog } from "../audit/store.ts";
import { DomainError, type WireIssue } from "../errors.ts";
import type { OperatorService } from "../operator/service.ts";
import type { TimelineItem } from "./model.ts";

/** The console's own refusals, besides the protocol's error codes. */
export type ConsoleRefusal = "read_only" | "login_required" | "authority_too_low";

export type ConsoleAnswer<T = unknown> = { ok: true; value: T } | { ok: false; error: string; issues?: WireIssue[] };

export const ConsoleSendInput = OperatorCreateCommand;
export const ConsoleCancelInput = z.strictObject({ session_id: Id, command_id: Id });
export const ConsoleStopInput = z.strictObject({ session_id: Id });
export const ConsoleEntryInput = z.strictObject({ id: z.number().int().positive().max(Number.MAX_SAFE_INTEGER) });
export const ConsoleTimelineInput = AuditQuery;

/** How long a stop waits for the session's ACK before the page gets the command as it stands. */
export const STOP_WAIT_MS = 10_000;

export interface ConsoleActionDeps {
  operator: OperatorService;
}

export interface ConsoleAction<I extends z.ZodType = z.ZodType> {
  /** The listener's name on the console's WebSocket. */
  name: string;
  input: I;
  run(deps: ConsoleActionDeps, input: z.infer<I>): Promise<unknown>;
}

function action<I extends z.ZodType>(definition: ConsoleAction<I>): ConsoleAction<I> {
  return definition;
}

export const CONSOLE_ACTIONS: readonly ConsoleAction[] = [
  action({
    name: "anon-notify/send",
    input: ConsoleSendInput,
    // The page makes one key per submit, so a repeated submit (a reconnect, a double click) queues once.
    run: ({ operator }, input) =>
      operator.createCommand({ ...input, request_key: input.request_key === undefined ? null : `console:${input.request_key}`, origin: "operator" }),
  }),
  action({
    name: "anon-notify/cancel",
    input: ConsoleCancelInput,
    run: ({ operator }, input) => operator.cancel(input.session_id, input.command_id),
  }),
  action({
    name: "anon-notify/stop",
    input: ConsoleStopInput,
    // The page shows what the session did (stopped, already idle), so the answer waits for the ACK, bounded.
    run: async ({ operator }, input) => {
      const stop = await operator.requestStop(input.session_id, "console");
      return operator.waitForCommandOutcome(stop.command_id, STOP_WAIT_MS);
    },
  }),
];

/** Reading listeners: allowed wherever the console's data is. */
export interface ConsoleReads {
  timeline(query: AuditQuery): Promise<{ entries: TimelineItem[]; next_before: number | null }>;
  entry(id: number): Promise<AuditEntry | undefined>;
}

export const CONSOLE_READS = {
  timeline: { name: "anon-notify/timeline", input: ConsoleTimelineInput },
  entry: { name: "anon-notify/entry", input: ConsoleEntryInput },
} as const;

/** Parses, runs and turns every failure into an answer. */
export async function answer<I extends z.ZodType>(input: I, raw: unknown, run: (value: z.infer<I>) => Promise<unknown>): Promise<ConsoleAnswer> {
  const parsed = input.safeParse(raw);
  if (!parsed.success) return { ok: false, error: "invalid_request", issues: wireIssues(parsed.error) };
  try {
    return { ok: true, value: await run(parsed.data) };
  } catch (error) {
    if (error instanceof DomainError) return error.issues ? { ok: false, error: error.code, issues: error.issues } : { ok: false, error: error.code };
    throw error;
  }
}

/** One audit row per console action, with what was asked (images as digests) and how it ended. */
export async function auditAction(audit: AuditLog, name: string, input: unknown, result: ConsoleAnswer, who: Record<string, unknown>): Promise<void> {
  const fields = input && typeof input === "object" ? (input as Record<string, unknown>) : {};
  const sessionId = Id.safeParse(fields.session_id);
  // A send answers `{command}`, a stop the command itself.
  const value = result.ok ? (result.value as { command?: { command_id?: unknown }; command_id?: unknown } | undefined) : undefined;
  const commandId = value?.command?.command_id ?? value?.command_id;
  await audit.record({
    actor: "console",
    action: `console.${name.slice(name.indexOf("/") + 1)}`,
    session_id: sessionId.success ? sessionId.data : null,
    subject: typeof fields.command_id === "string" ? fields.command_id : typeof commandId === "string" ? commandId : null,
    data: { input, status: result.ok ? "ok" : "refused", error: result.ok ? null : result.error, client: who },
  });
}
