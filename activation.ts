/** Per-session activation: the newest `anon-notify:activation` entry, read at every session_start and failing closed, so a switch survives reloads. */
import { readFileSync } from "node:fs";
import { readFile } from "node:fs/promises";
import { z } from "zod";
import type { RecipientStatus } from "./protocol/status.ts";

export const ACTIVATION_CUSTOM_TYPE = "anon-notify:activation";
export const ACTIVATION_VERSION = 1;

/** `via` says why the record was written: the bare command, or a fork/clone's inheritance snapshot. */
export const ActivationRecord = z.strictObject({
  version: z.literal(ACTIVATION_VERSION),
  active: z.boolean(),
  via: z.enum(["command", "inherit"]),
});
export type ActivationRecord = z.infer<typeof ActivationRecord>;

export type ActivationReading =
  | { record: "none"; active: false }
  | { record: "valid"; active: boolean; via: ActivationRecord["via"] }
  | { record: "invalid"; active: false; problem: string };

type Entry = { type?: unknown; customType?: unknown; id?: unknown; data?: unknown } | null | undefined;
const isActivationEntry = (entry: unknown) => (entry as Entry)?.type === "custom" && (entry as Entry)?.customType === ACTIVATION_CUSTOM_TYPE;

/** The newest activation record across all branches; a malformed or unknown-version newest record means inactive, never an older one. */
export function readActivation(entries: readonly unknown[]): ActivationReading {
  const newest = entries.findLast(isActivationEntry) as Entry;
  if (!newest) return { record: "none", active: false };
  const parsed = ActivationRecord.safeParse(newest?.data);
  if (!parsed.success) return { record: "invalid", active: false, problem: parsed.error.issues[0]?.message ?? "invalid record" };
  return { record: "valid", active: parsed.data.active, via: parsed.data.via };
}

/** Session JSONL lines as entries, skipping lines that are not JSON as Pi's own loader does. */
export function parseSessionLines(text: string): unknown[] {
  const entries: unknown[] = [];
  for (const line of text.split("\n")) {
    if (!line.trim()) continue;
    try {
      entries.push(JSON.parse(line));
    } catch {
      // A torn last line after a crash is not an entry.
    }
  }
  return entries;
}

/** The session-wide activation of another session file (a fork's source); undefined when unreadable. */
export function readActivationFromFile(path: string): ActivationReading | undefined {
  try {
    return readActivation(parseSessionLines(readFileSync(path, "utf8")));
  } catch {
    return undefined;
  }
}

/** What Pi Web shows for a dormant session's JSONL file: the stored switch, nothing guessed; reads no config or token, throws only when unreadable. */
export async function readDormantActivation(sessionFile: string) {
  const entries = parseSessionLines(await readFile(sessionFile, "utf8"));
  const header = entries.find((entry) => (entry as Entry)?.type === "session") as Entry;
  const reading = readActivation(entries);
  return {
    source: "dormant" as const,
    sessionId: typeof header?.id === "string" ? header.id : null,
    sessionActive: reading.active,
    // Dormant active sessions may be switched off; switching on needs a live runtime's checks.
    canDisable: reading.active,
    record: reading.record,
  };
}

export const SUBAGENT_ENV = "ANON_NOTIFY_SUBAGENT";
export const SUBAGENT_FLAG = "anon-notify-off";
/** Passed by anon-notify-host: the session is switched on at its start when it has no activation record yet. */
export const START_ON_FLAG = "anon-notify-on";
/** Passed by anon-notify-host with a start job's limits, as JSON (`{"turns"?,"minutes"?}`): each run of this Pi is stopped past them. */
export const LIMITS_FLAG = "anon-notify-limits";
/** Passed by anon-notify-host when a start job says `"approvals":"strict"` (a trigger's session): the gate is forced on in strict mode. */
export const APPROVALS_FLAG = "anon-notify-approvals";

/** The word Pi's parser took as `--<flag>`'s value (it parses before extensions register flags, so `-p --anon-notify-off "task"` loses the task). */
export function swallowedByFlag(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    // After `--` every argument is a message.
    if (arg === "--") return undefined;
    if (arg !== `--${flag}`) continue;
    const next = args[i + 1];
    if (next !== undefined && !next.startsWith("-") && !next.startsWith("@")) return next;
  }
  return undefined;
}

const QUOTE_LIMIT = 40;

/** The swallowed prompt as quoted in the refusal (messages.ts `session.swallowedPrompt`): shortened, JSON-quoted. */
export function quotedPrompt(swallowed: string): string {
  return JSON.stringify(swallowed.length > QUOTE_LIMIT ? `${swallowed.slice(0, QUOTE_LIMIT)}…` : swallowed);
}

/** A subagent: JSON or print mode without a session file (what Pi's subagent example spawns), or one `--anon-notify-off` / `ANON_NOTIFY_SUBAGENT=1` names. */
export function isSubagent(facts: { mode: string; sessionFile: string | undefined; optOutFlag: boolean; env: NodeJS.ProcessEnv }, mainAgentOnly: boolean) {
  if (facts.optOutFlag) return true;
  const envValue = facts.env[SUBAGENT_ENV]?.trim().toLowerCase();
  if (envValue && envValue !== "0" && envValue !== "false") return true;
  return mainAgentOnly && (facts.mode === "json" || facts.mode === "print") && facts.sessionFile === undefined;
}

/** The server's answer to `GET /recipient`, or why there is none. */
export type RecipientCheck = { kind: "answer"; status: RecipientStatus; reason: string | null } | { kind: "network_error"; message: string };

/** `allow` with the footer's note (`reachable`, `unverified`, `unknown`), or refused because the server says the friend is missing. */
export type EnableVerdict =
  | { allow: true; note: "reachable" }
  | { allow: true; note: "unverified" | "unknown"; why: string }
  | { allow: false; status: "not_added" | "unreachable" };

/** Whether `/anon-notify` may switch on, given the recipient status; a network error is no evidence the friend is missing: allow, unverified. */
export function enableVerdict(check: RecipientCheck): EnableVerdict {
  if (check.kind === "network_error") return { allow: true, note: "unverified", why: check.message };
  switch (check.status) {
    case "ok":
      return { allow: true, note: "reachable" };
    case "unknown":
      return { allow: true, note: "unknown", why: check.reason ?? "not_checked" };
    case "not_added":
    case "unreachable":
      return { allow: false, status: check.status };
  }
}
