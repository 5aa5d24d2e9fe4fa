/** What each session did, as runs built from the audit trail's events and command rows, and one sentence
 * per timeline line. */
import type { AuditActor, AuditEntry } from "../../protocol/audit.ts";
import type { ContextUsage, EventStatus } from "../../protocol/events.ts";
import { CommandKind, StoppedRun } from "../../protocol/queue.ts";
import { readSaid, type ReadSaid } from "../../protocol/said.ts";

export type RunOutcome = "running" | "done" | "failed" | "stopped" | "interrupted";

/** `key` is the audit row that opened it; `failure` the notice's `failure_reason`, else its stop reason;
 * `reply` the final notice's words the extension did not write itself (finalWords); `latest` the newest
 * progress or tool-error notice, its `said` for the page to word; `final_id` the final notice's row. */
export interface RunView {
  key: number;
  task: string;
  started_at: string | null;
  ended_at: string | null;
  duration_ms: number | null;
  outcome: RunOutcome;
  failure: string | null;
  stopped_by: AuditActor | null;
  reply: string | null;
  context: ContextUsage | null;
  latest: { at: string; status: EventStatus; summary: string; said: ReadSaid | null } | null;
  final_id: number | null;
}

export const record = (value: unknown): Record<string, unknown> =>
  value && typeof value === "object" && !Array.isArray(value) ? (value as Record<string, unknown>) : {};

/** A stored event's said line, if the page may word it (protocol/said.ts `readSaid`). */
export function saidOf(event: Record<string, unknown>): ReadSaid | null {
  const { event_id: id, status, summary } = event;
  if (typeof id !== "string" || typeof status !== "string" || typeof summary !== "string") return null;
  return readSaid({ event_id: id, status: status as EventStatus, summary, details: record(event.details) }) ?? null;
}

/** What of a final notice is not the extension's own words (the agent's reply, Pi's error text) as markdown,
 * when its said line is checked; else the summary as it came. */
function finalWords(event: Record<string, unknown>): string | null {
  const read = saidOf(event);
  if (!read) return String(event.summary ?? "");
  const error = read.said.key === "run_failed" ? (read.said.params.error ?? "") : "";
  return [error, read.agent].filter(Boolean).join("\n\n") || null;
}

const text = (value: unknown): string | null => (typeof value === "string" && value ? value : null);

/** The final notice's `run_started_at`, when it is a time no later than the notice (anything else is not believed). */
function reportedStart(details: Record<string, unknown>, at: string): string | null {
  const started = text(details.run_started_at);
  const time = started === null ? Number.NaN : Date.parse(started);
  return Number.isFinite(time) && time <= Date.parse(at) ? new Date(time).toISOString() : null;
}

/** The run a stop's ACK names (`data.run`), its start believed only between the end of the run before
 * (`notBefore`) and the ACK. */
function ackedRun(value: unknown, at: string, notBefore: string | null): { task: string; started_at: string | null } {
  const parsed = StoppedRun.safeParse(value);
  if (!parsed.success) return { task: "", started_at: null };
  const time = parsed.data.started_at === undefined ? Number.NaN : Date.parse(parsed.data.started_at);
  const believed = time <= Date.parse(at) && (notBefore === null || time >= Date.parse(notBefore));
  return { task: parsed.data.task, started_at: believed ? new Date(time).toISOString() : null };
}

/** The runs read so far, oldest first; who queued each command (and the row that leased it); the row that
 * ended the newest run (its final notice or the confirmed stop), and when. */
interface Trail {
  runs: RunView[];
  open: RunView | null;
  pending: Map<string, { actor: AuditActor; instruction: string | null; leasedRow?: number }>;
  lastEndRow: number;
  lastEndAt: string | null;
}

/** The runs of one session from its audit rows (any order), newest first, as docs/protocol.md's `RunView` says. */
export function sessionRuns(rows: readonly AuditEntry[], limits = { maxRuns: 30 }): RunView[] {
  const trail: Trail = { runs: [], open: null, pending: new Map(), lastEndRow: 0, lastEndAt: null };
  for (const entry of [...rows].sort((a, b) => a.id - b.id)) {
    if (entry.action === "event.accepted") eventRow(trail, entry);
    else if (entry.subject) commandRow(trail, entry, entry.subject);
  }
  return trail.runs.reverse().slice(0, limits.maxRuns);
}

function commandRow(trail: Trail, entry: AuditEntry, subject: string): void {
  const data = record(entry.data);
  if (entry.action === "command.pending") {
    trail.pending.set(subject, { actor: entry.actor, instruction: text(data.instruction) });
  } else if (entry.action === "command.leased") {
    const queued = trail.pending.get(subject);
    if (queued) queued.leasedRow = entry.id;
  } else if (entry.action === "command.accepted") {
    const queued = trail.pending.get(subject);
    if (data.kind === "stop" && data.outcome === "stopped") {
      // A run typed in the terminal with start notices off is on the trail only through its stop,
      // whose ACK names it; an open run takes only what it lacks.
      const acked = ackedRun(data.run, entry.at, trail.lastEndAt);
      const run = trail.open ?? begin(trail, entry, acked.task, acked.started_at);
      if (!run.task) run.task = acked.task;
      run.started_at ??= acked.started_at;
      run.stopped_by = queued?.actor ?? entry.actor;
      end(trail, run, "stopped", entry.at, entry.id);
    } else if (data.kind === "instruction" && !trail.open) {
      // Taken before the newest run ended (its ACK came after the final notice): it was that run's.
      const endedSinceTaken = queued?.leasedRow !== undefined && trail.lastEndRow > queued.leasedRow;
      if (!endedSinceTaken) begin(trail, entry, queued?.instruction ?? "", entry.at);
    }
  }
}

function eventRow(trail: Trail, entry: AuditEntry): void {
  const event = record(record(entry.data).event);
  const status = event.status as EventStatus;
  const task = text(event.task) ?? "";
  const at = text(event.created_at) ?? entry.at;
  const context = (event.context_usage as ContextUsage | null | undefined) ?? null;
  if (status === "started") {
    begin(trail, entry, task, at);
  } else if (status === "progress" || status === "tool_error" || status === "completed" || status === "failed") {
    const run = trail.open ?? begin(trail, entry, task, null);
    if (!run.task) run.task = task;
    run.context = context ?? run.context;
    if (status === "progress" || status === "tool_error") {
      run.latest = { at, status, summary: String(event.summary ?? ""), said: saidOf(event) };
      return;
    }
    const details = record(event.details);
    run.started_at ??= reportedStart(details, at);
    run.reply = finalWords(event);
    run.final_id = entry.id;
    run.failure = status === "failed" ? (text(details.failure_reason) ?? text(details.stop_reason)) : null;
    end(trail, run, status === "completed" ? "done" : "failed", at, entry.id);
  }
}

/** What a run learns as its trail goes on. */
const NOT_YET_KNOWN = { failure: null, stopped_by: null, reply: null, context: null, latest: null, final_id: null };

function begin(trail: Trail, entry: AuditEntry, task: string, startedAt: string | null): RunView {
  if (trail.open) end(trail, trail.open, "interrupted", trail.open.latest?.at ?? trail.open.started_at);
  const run: RunView = { key: entry.id, task, started_at: startedAt, ended_at: null, duration_ms: null, outcome: "running", ...NOT_YET_KNOWN };
  trail.open = run;
  trail.runs.push(run);
  return run;
}

/** `endRow`: the row that ended it (a final notice or a confirmed stop), not an interruption. */
function end(trail: Trail, run: RunView, outcome: RunOutcome, at: string | null, endRow?: number): void {
  run.outcome = outcome;
  run.ended_at = at;
  run.duration_ms = run.started_at && at ? Math.max(0, Date.parse(at) - Date.parse(run.started_at)) : null;
  if (trail.open === run) trail.open = null;
  if (endRow === undefined) return;
  trail.lastEndRow = endRow;
  trail.lastEndAt = at;
}

/** One timeline line as a key of the page's `say` texts and its values; the page words the codes and a
 * notice's checked `said` (instead of `params.summary`). */
export interface Say {
  key: string;
  params: Record<string, string>;
  said?: ReadSaid;
}

const SAY_CHARS = 160;

function clipped(value: unknown): string {
  const line = typeof value === "string" ? value.replace(/\s+/g, " ").trim() : "";
  return line.length > SAY_CHARS ? `${line.slice(0, SAY_CHARS - 1)}…` : line;
}

const EVENT_SAY: Partial<Record<string, string>> = {
  started: "started",
  progress: "progress",
  tool_error: "tool_error",
  completed: "finished",
  failed: "failed",
  warning: "notice",
  info: "notice",
};

/** Rows whose sentence is a key and these fields of the row's data. */
const PLAIN_SAY: Partial<Record<string, [key: string, ...fields: string[]]>> = {
  "event.held": ["held"],
  "approval.request_sent": ["approval_sent", "code"],
  "approval.decided": ["approval_decided", "code", "decision", "via"],
  "approval.resolved": ["approval_resolved", "code", "outcome", "via"],
  "approval.refused": ["approval_refused", "error"],
  "mute.set": ["muted", "until"],
  "mute.ended": ["unmuted"],
  "tool_call.refused": ["tool_refused", "reason"],
  "console.sign_in": ["signed_in"],
  "operator.request": ["operator_request", "method", "path", "status"],
};

/** The sentence for one audit row. Pure. */
export function timelineSay(entry: Pick<AuditEntry, "action" | "actor" | "data">): Say {
  const data = record(entry.data);
  const say = (key: string, params: Record<string, unknown> = {}): Say => ({
    key,
    params: Object.fromEntries(Object.entries(params).map(([name, value]) => [name, clipped(typeof value === "number" ? String(value) : value)])),
  });
  const family = entry.action.split(".", 1)[0];
  const rest = entry.action.slice(family!.length + 1);
  const plain = PLAIN_SAY[entry.action];
  if (plain) return say(plain[0], Object.fromEntries(plain.slice(1).map((field) => [field, data[field]])));
  switch (entry.action) {
    case "event.accepted": {
      const event = record(data.event);
      const details = record(event.details);
      const line = say(EVENT_SAY[String(event.status)] ?? "notice", {
        task: event.task,
        summary: event.summary,
        why: details.failure_reason ?? details.stop_reason,
      });
      const read = saidOf(event);
      return read ? { ...line, said: { ...read, agent: clipped(read.agent) } } : line;
    }
    case "event.handed_to_persona":
    case "event.sent_direct": {
      const outcome = record(data.outcome);
      const ok = outcome.kind === "injected" || outcome.kind === "sent" || outcome.kind === "delivered";
      // The log persona (persona/log.ts, named "log") only prints the block in the server's terminal: nobody was told.
      if (ok && data.persona === "log") return say("printed_only");
      const key = entry.action === "event.handed_to_persona" ? "told_anon" : "sent_direct";
      return ok ? say(key) : say(`${key}_failed`, { why: outcome.error ?? outcome.reason ?? outcome.kind });
    }
    case "command.pending":
      return data.kind === "instruction"
        ? say("queued", { by: entry.actor, text: data.instruction })
        : say(data.kind === "stop" ? "stop_asked" : "answer_queued", { by: entry.actor });
    case "command.leased":
      return say(`taken.${CommandKind.catch("instruction").parse(data.kind)}`);
    case "command.accepted":
      if (data.kind === "stop") return say(data.outcome === "stopped" ? "stopped" : "already_idle");
      return say(data.kind === "instruction" ? "instruction_delivered" : "answer_delivered");
    case "command.cancelled":
      return say(data.cancel_reason === "expired" ? "command_expired" : "command_cancelled");
    case "approval.requested":
      // The action as requested, with its code: the page words it (console/client/action-text.ts).
      return say("approval_requested", { code: data.code, action: data.action ?? data.command, action_code: data.action_code, source: data.source });
  }
  if (family === "watchdog") return say(rest.endsWith("_cleared") ? "watchdog_cleared" : `watchdog_${rest}`);
  if (family === "console") return data.status === "ok" ? say(`page_done.${rest}`) : say("page_refused", { verb: rest, status: data.error ?? data.status });
  if (family === "persona") return say("persona_tool", { name: rest, status: data.error ?? data.status });
  return say("other", { action: entry.action });
}
