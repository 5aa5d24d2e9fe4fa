/** What the owner's page shows (board, approvals, timeline lines), who may act, and which WebSocket origins
 * may reach it. These shapes are the page's wire. */
import { ruleSites, type RuleSite } from "../../common/rule-sites.ts";
import { isIP } from "node:net";
import { redactSecrets } from "../../common/redact.ts";
import type { Approval } from "../../protocol/approvals.ts";
import { commandLines, oneLine } from "../approvals/message-rules.ts";
import type { AuditEntry } from "../../protocol/audit.ts";
import type { CommandSummary } from "../../protocol/queue.ts";
import type { Receipt } from "../../protocol/events.ts";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { record, timelineSay, type Say } from "./run-rules.ts";

// ── Session board ───────────────────────────────────────────────────────────

export type WatchdogFlag = "stalled" | "vanished";
export type GoneReason = "offline" | "expired";

export interface BoardEntry {
  projection: SessionProjection;
  /** The tool running at the last activity, by name only. */
  activity: string | null;
  /** When the server first saw the session in its current state (a restart starts the clock again). */
  stateSinceMs: number;
  /** The state it left last, and when: a flicker back to it within `STATE_FLICKER_MS` keeps that state's start. */
  left: { state: SessionProjection["state"]; sinceMs: number; atMs: number } | null;
  goneAtMs: number | null;
  goneReason: GoneReason | null;
  flags: WatchdogFlag[];
}

export type Board = ReadonlyMap<string, BoardEntry>;

/** Gone sessions stay on the board this long, and at most this many of them, newest first. */
export const BOARD_LIMITS = { keepGoneMs: 24 * 60 * 60 * 1000, maxGone: 20 };

/**
 * A session between two tool turns reports idle for a moment (its presence settles) and then runs
 * again: a return to the state it left this recently is the same stretch, not a new one.
 */
export const STATE_FLICKER_MS = 3_000;

/** A heartbeat was recorded: the session is online (again) with this projection and activity. */
export function boardRecorded(board: Board, projection: SessionProjection, activity: string | null, nowMs: number): Board {
  const previous = board.get(projection.session_id);
  const online = previous !== undefined && previous.goneAtMs === null;
  const sameState = online && previous.projection.state === projection.state;
  const flickeredBack = online && !sameState && previous.left?.state === projection.state && nowMs - previous.left.atMs <= STATE_FLICKER_MS;
  const next = new Map(board);
  next.set(projection.session_id, {
    projection,
    activity: projection.state === "running" && activity !== null ? oneLine(activity) : null,
    stateSinceMs: sameState ? previous.stateSinceMs : flickeredBack ? previous.left!.sinceMs : nowMs,
    left: sameState ? previous.left : online ? { state: previous.projection.state, sinceMs: previous.stateSinceMs, atMs: nowMs } : null,
    goneAtMs: null,
    goneReason: null,
    // A session that is back has not vanished; a stall is only cleared by the watchdog itself.
    flags: (previous?.flags ?? []).filter((flag) => flag !== "vanished"),
  });
  return next;
}

/** The session went offline or its heartbeats stopped. */
export function boardGone(board: Board, sessionId: string, reason: GoneReason, nowMs: number): Board {
  const previous = board.get(sessionId);
  if (!previous || previous.goneAtMs !== null) return board;
  const next = new Map(board);
  next.set(sessionId, { ...previous, goneAtMs: nowMs, goneReason: reason, stateSinceMs: nowMs, activity: null, left: null });
  return next;
}

/** Watchdog rows raise and clear flags; every other row leaves the board as it is. */
export function boardAudited(board: Board, entry: Pick<AuditEntry, "action" | "session_id">): Board {
  const match = /^watchdog\.(stalled|vanished)(_cleared)?$/.exec(entry.action);
  if (!match || !entry.session_id) return board;
  const previous = board.get(entry.session_id);
  if (!previous) return board;
  const flag = match[1] as WatchdogFlag;
  const flags = match[2] ? previous.flags.filter((item) => item !== flag) : previous.flags.includes(flag) ? previous.flags : [...previous.flags, flag];
  const next = new Map(board);
  next.set(entry.session_id, { ...previous, flags });
  return next;
}

/** Drops gone sessions older than `keepGoneMs` and beyond the newest `maxGone`. */
export function boardPruned(board: Board, nowMs: number, limits: typeof BOARD_LIMITS): Board {
  const gone = [...board.values()].filter((entry) => entry.goneAtMs !== null).sort((a, b) => b.goneAtMs! - a.goneAtMs!);
  const drop = gone.filter((entry, index) => index >= limits.maxGone || nowMs - entry.goneAtMs! > limits.keepGoneMs);
  if (drop.length === 0) return board;
  const next = new Map(board);
  for (const entry of drop) next.delete(entry.projection.session_id);
  return next;
}

export type ConsoleSession = ReturnType<typeof boardView>[number];

/** Online sessions first (most recently seen first), then the gone ones (most recently gone first). */
export function boardView(board: Board, commands: ReadonlyMap<string, CommandSummary[]>) {
  const rank = (entry: BoardEntry) => (entry.goneAtMs === null ? Date.parse(entry.projection.last_seen_at) + 1e15 : entry.goneAtMs);
  return [...board.values()]
    .sort((a, b) => rank(b) - rank(a))
    .map((entry) => ({
      ...entry.projection,
      online: entry.goneAtMs === null,
      activity: entry.activity,
      // Since when the session is in `state` (or gone).
      state_since: new Date(entry.stateSinceMs).toISOString(),
      gone_at: entry.goneAtMs === null ? null : new Date(entry.goneAtMs).toISOString(),
      gone_reason: entry.goneReason,
      flags: entry.flags,
      // The newest instructions to this session, newest first.
      commands: commands.get(entry.projection.session_id) ?? [],
    }));
}

// ── Approvals ───────────────────────────────────────────────────────────────

/**
 * An open approval on the page; what the agent wrote is redacted again and shown on one line with
 * its controls visible; `command_lines` is the whole command, a line per line it has.
 */
export type ConsoleApproval = Omit<Approval, "command" | "matched" | "via" | "resolved_at"> & { command_lines: string[]; sites: RuleSite[] };

export function consoleApproval(approval: Approval): ConsoleApproval {
  const { command, matched, via: _via, resolved_at: _resolved, ...shown } = approval;
  return {
    ...shown,
    action: oneLine(approval.action),
    reason: oneLine(approval.reason),
    preview: redactSecrets(approval.preview),
    rules: approval.rules.map(oneLine),
    command_lines: commandLines(command),
    sites: ruleSites(approval.rules, matched ?? null, redactSecrets(command)).map((site) => ({
      ...site,
      rule: oneLine(site.rule),
      ...(site.at === undefined ? {} : { at: oneLine(site.at) }),
    })),
  };
}

// ── Timeline ────────────────────────────────────────────────────────────────

export type TimelineReceipt = Pick<Receipt, "state" | "attempts" | "error">;

/** One audit entry as one line; the full entry (the exact text handed over) is fetched on demand. */
export interface TimelineItem {
  id: number;
  at: string;
  actor: AuditEntry["actor"];
  action: string;
  session_id: string | null;
  subject: string | null;
  /** What it was about, in the words it came with (a notice's summary, an instruction's start…). */
  text: string;
  /** How it ended, as a code: an outcome kind, an HTTP status, an error code. */
  outcome: string | null;
  /** For an accepted event: what has become of it since (its receipt now). */
  receipt: TimelineReceipt | null;
  /** Whether the full entry holds more than this line (an exact hand-over text, an event body). */
  detail: boolean;
  /** The session's project, when the trail or the board knows it (`timelineLines`). */
  project: string | null;
  /** The line in words (run-rules.ts). */
  say: Say;
}

const TEXT_CHARS = 200;

function clip(value: unknown): string {
  const text = typeof value === "string" ? value : value === undefined || value === null ? "" : JSON.stringify(value);
  return text.length > TEXT_CHARS ? `${text.slice(0, TEXT_CHARS - 1)}…` : text;
}

/** What a row of these families is about; its outcome is the rest of its action. */
const FAMILY_TEXT = {
  mute: (data: Record<string, unknown>) => data.until ?? data.ended ?? "",
  command: (data: Record<string, unknown>) => data.instruction,
  tool_call: (data: Record<string, unknown>) => data.reason,
  watchdog: (data: Record<string, unknown>) => data.activity ?? data.reason ?? "",
};

/** The line for one audit entry. Pure. */
export function timelineItem(entry: AuditEntry, receipt: TimelineReceipt | null = null): TimelineItem {
  const { data } = entry;
  let text = "";
  let outcome: string | null = null;
  let detail = false;
  const family = entry.action.split(".", 1)[0];
  if (entry.action === "event.accepted") {
    const event = record(data.event);
    text = clip(`${String(event.status ?? "")} · ${String(event.summary ?? "")}`);
    detail = true;
  } else if (entry.action === "event.handed_to_persona" || entry.action === "event.sent_direct") {
    const result = record(data.outcome);
    text = clip(data.text);
    outcome = [result.kind, result.error ?? result.reason].filter((part) => typeof part === "string" && part).join(": ") || null;
    detail = true;
  } else if (entry.action === "event.held") {
    outcome = "held";
  } else if (family === "approval") {
    text = clip([data.code, data.tool, data.action, data.decision, data.outcome, data.state].filter((part) => typeof part === "string" && part).join(" · "));
    outcome = String(data.error ?? "") || entry.action.slice("approval.".length);
  } else if (family === "mute" || family === "command" || family === "tool_call" || family === "watchdog") {
    text = clip(FAMILY_TEXT[family](data));
    outcome = entry.action.slice(family.length + 1);
  } else if (entry.action === "operator.request") {
    text = `${String(data.method ?? "")} ${String(data.path ?? "")}`;
    outcome = [data.status, data.error].filter((part) => part !== null && part !== undefined).join(" ") || null;
    detail = true;
  } else if (family === "console" || family === "persona") {
    const input = record(data.input);
    text = clip(input.instruction ?? input.command_id ?? input.approval_id ?? input.event_id ?? data.input);
    outcome = String(data.error ?? data.status ?? "") || null;
    detail = true;
  }
  return {
    id: entry.id,
    at: entry.at,
    actor: entry.actor,
    action: entry.action,
    session_id: entry.session_id,
    subject: entry.subject,
    text,
    outcome,
    receipt,
    detail: detail || family === "approval" || family === "command",
    project: typeof data.project === "string" ? data.project : null,
    say: timelineSay(entry),
  };
}

/**
 * The page's lines, newest first: each accepted event with its receipt now (`rows`), each named by
 * its session's project (the board's, else one the trail recorded with a notice), and a run of
 * sign-ins (every page load signs in) as one line with its count. Pure.
 */
export function timelineLines(entries: readonly AuditEntry[], rows: readonly (TimelineReceipt & { event_id: string })[], board: Board): TimelineItem[] {
  const receipts = new Map(rows.map(({ event_id, state, attempts, error }) => [event_id, { state, attempts, error }]));
  const items = entries.map((entry) => timelineItem(entry, entry.action === "event.accepted" ? (receipts.get(entry.subject ?? "") ?? null) : null));
  const recorded = new Map(items.filter((item) => item.session_id && item.project).map((item) => [item.session_id!, item.project!]));
  const lines: TimelineItem[] = [];
  for (const item of items) {
    const previous = lines.at(-1);
    if (item.action === "console.sign_in" && previous?.action === "console.sign_in") {
      previous.say = { key: "signed_in_times", params: { n: String(Number(previous.say.params.n ?? 1) + 1) } };
      continue;
    }
    const session = item.session_id;
    lines.push({ ...item, project: item.project ?? (session ? (board.get(session)?.projection.project ?? recorded.get(session) ?? null) : null) });
  }
  return lines;
}

// ── Who may see and act ─────────────────────────────────────────────────────

/**
 * What a console client may do on this page: everything (`via` says why) or nothing at all (no
 * data, every call `unauthorized`), never half. `open` is the owner's explicit `consoleActions`.
 */
export type ActionGate =
  | { allowed: true; via: "auth" | "token" | "open" }
  | { allowed: false; reason: "sign_in_required" | "login_required" | "authority_too_low" };

export interface GateInput {
  /** `@koishijs/plugin-auth` is loaded: its logins and authority levels decide. */
  authInstalled: boolean;
  /** The console client's logged-in authority, null when not logged in. */
  authority: number | null;
  required: number;
  /** Without plugin-auth: this client presented the console token. */
  signedIn: boolean;
  /** Without plugin-auth: the owner let whoever reaches the port in (`consoleActions`). */
  openToAll: boolean;
}

/** Whether a console client may see the page's data and act. Pure. */
export function actionGate(input: GateInput): ActionGate {
  if (input.authInstalled) {
    if (input.authority === null) return { allowed: false, reason: "login_required" };
    if (input.authority < input.required) return { allowed: false, reason: "authority_too_low" };
    return { allowed: true, via: "auth" };
  }
  if (input.openToAll) return { allowed: true, via: "open" };
  return input.signedIn ? { allowed: true, via: "token" } : { allowed: false, reason: "sign_in_required" };
}

// ── Which pages may reach the console's WebSocket ──────────────────────────

export type OriginDecision = { allowed: true } | { allowed: false; reason: "cross_origin" | "untrusted_host" };

function originOf(value: string): string | null {
  try {
    const url = new URL(value);
    return url.protocol === "http:" || url.protocol === "https:" ? url.origin : null;
  } catch {
    return null;
  }
}

function isLocalName(hostname: string): boolean {
  const bare = hostname.replace(/^\[|\]$/g, "");
  return bare === "localhost" || bare.endsWith(".localhost") || isIP(bare) !== 0;
}

/**
 * Browsers always send `Origin` on a WebSocket handshake and a page cannot forge it, so a handshake
 * whose origin is not the console's own page was opened by another site (cross-site WebSocket
 * hijacking). Same origin is not enough either: a rebound DNS name makes another site's page
 * same-origin with a server on loopback, so a same-origin page must also be addressed by an IP
 * address or `localhost`, unless its origin is listed (the console's `selfUrl`, a reverse proxy).
 * No `Origin` at all is not a browser page (a script on the machine, which needs no hijacking). Pure.
 */
export function originDecision(origin: string | undefined, host: string | undefined, trusted: readonly string[]): OriginDecision {
  if (origin === undefined) return { allowed: true };
  const normalized = originOf(origin);
  if (normalized === null) return { allowed: false, reason: "cross_origin" };
  if (trusted.some((item) => originOf(item) === normalized)) return { allowed: true };
  const url = new URL(normalized);
  if (!host || url.host !== host.toLowerCase()) return { allowed: false, reason: "cross_origin" };
  return isLocalName(url.hostname) ? { allowed: true } : { allowed: false, reason: "untrusted_host" };
}
