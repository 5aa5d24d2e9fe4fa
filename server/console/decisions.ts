/** What the owner's page shows (board, approvals, timeline lines), who may act, and which WebSocket origins
 * may reach it. These shapes are the page's wire. */
import { ruleSites } from "../../common/rule-sites.ts";
import { isIP } from "node:net";
import { redactSecrets } from "../../common/redact.ts";
import type { Approval } from "../../protocol/approvals.ts";
import { commandLines, oneLine } from "../approvals/message-rules.ts";
import type { AuditEntry } from "../../protocol/audit.ts";
import type { CommandSummary } from "../../protocol/queue.ts";
import type { Receipt } from "../../protocol/events.ts";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { record, timelineSay } from "./run-rules.ts";

type WatchdogFlag = "stalled" | "vanished";
type GoneReason = "offline" | "expired";

interface BoardEntry {
  projection: SessionProjection;
  /** The running tool's name; `stateSinceMs` restarts with the server. */
  activity: string | null;
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

/** A session between two tool turns reports idle for a moment: a return this soon is the same stretch. */
export const STATE_FLICKER_MS = 3_000;

export function boardRecorded(board: Board, projection: SessionProjection, activity: string | null, nowMs: number): Board {
  const previous = board.get(projection.session_id);
  const online = previous !== undefined && previous.goneAtMs === null;
  const sameState = online && previous.projection.state === projection.state;
  const flickeredBack = online && !sameState && previous.left?.state === projection.state && nowMs - previous.left.atMs <= STATE_FLICKER_MS;
  return new Map(board).set(projection.session_id, {
    projection,
    activity: projection.state === "running" && activity !== null ? oneLine(activity) : null,
    stateSinceMs: sameState ? previous.stateSinceMs : flickeredBack ? previous.left!.sinceMs : nowMs,
    left: sameState ? previous.left : online ? { state: previous.projection.state, sinceMs: previous.stateSinceMs, atMs: nowMs } : null,
    goneAtMs: null,
    goneReason: null,
    // A session that is back has not vanished; a stall is only cleared by the watchdog itself.
    flags: (previous?.flags ?? []).filter((flag) => flag !== "vanished"),
  });
}

export function boardGone(board: Board, sessionId: string, reason: GoneReason, nowMs: number): Board {
  const previous = board.get(sessionId);
  if (!previous || previous.goneAtMs !== null) return board;
  return new Map(board).set(sessionId, { ...previous, goneAtMs: nowMs, goneReason: reason, stateSinceMs: nowMs, activity: null, left: null });
}

/** Watchdog rows raise and clear flags; every other row leaves the board as it is. */
export function boardAudited(board: Board, entry: Pick<AuditEntry, "action" | "session_id">): Board {
  const match = /^watchdog\.(stalled|vanished)(_cleared)?$/.exec(entry.action);
  if (!match || !entry.session_id) return board;
  const previous = board.get(entry.session_id);
  if (!previous) return board;
  const flag = match[1] as WatchdogFlag;
  const flags = match[2] ? previous.flags.filter((item) => item !== flag) : previous.flags.includes(flag) ? previous.flags : [...previous.flags, flag];
  return new Map(board).set(entry.session_id, { ...previous, flags });
}

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
      state_since: new Date(entry.stateSinceMs).toISOString(),
      gone_at: entry.goneAtMs === null ? null : new Date(entry.goneAtMs).toISOString(),
      gone_reason: entry.goneReason,
      flags: entry.flags,
      commands: commands.get(entry.projection.session_id) ?? [],
    }));
}

/** An open approval on the page: the agent's words redacted again, on one line; `command_lines` a line per line. */
export type ConsoleApproval = ReturnType<typeof consoleApproval>;

export function consoleApproval(approval: Approval) {
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

type TimelineReceipt = Pick<Receipt, "state" | "attempts" | "error">;
export type TimelineItem = ReturnType<typeof timelineItem>;

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

/** One audit entry as one line: `text` what it was about, `outcome` a code, `detail` whether the full entry
 * (fetched on demand) holds more, `receipt` an accepted event's receipt now. Pure. */
export function timelineItem(entry: AuditEntry, receipt: TimelineReceipt | null = null) {
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

/** The page's lines, newest first, each named by its session's project (the board's, else one the trail
 * recorded), a run of sign-ins (every page load signs in) as one line with its count. Pure. */
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

/** What a console client may do on this page: everything (`via` says why) or nothing at all (no data, every
 * call `unauthorized`), never half. `open` is the owner's explicit `consoleActions`. */
export type ActionGate =
  | { allowed: true; via: "auth" | "token" | "open" }
  | { allowed: false; reason: "sign_in_required" | "login_required" | "authority_too_low" };

/** With plugin-auth its login (`authority`, null when not logged in) decides, else the console token or `consoleActions`. */
export interface GateInput {
  authInstalled: boolean;
  authority: number | null;
  required: number;
  signedIn: boolean;
  openToAll: boolean;
}

export function actionGate(input: GateInput): ActionGate {
  if (input.authInstalled) {
    if (input.authority === null) return { allowed: false, reason: "login_required" };
    if (input.authority < input.required) return { allowed: false, reason: "authority_too_low" };
    return { allowed: true, via: "auth" };
  }
  if (input.openToAll) return { allowed: true, via: "open" };
  return input.signedIn ? { allowed: true, via: "token" } : { allowed: false, reason: "sign_in_required" };
}

type OriginDecision = { allowed: true } | { allowed: false; reason: "cross_origin" | "untrusted_host" };

function originOf(value: string): string | null {
  const url = URL.canParse(value) ? new URL(value) : null;
  return url && (url.protocol === "http:" || url.protocol === "https:") ? url.origin : null;
}

function isLocalName(hostname: string): boolean {
  const bare = hostname.replace(/^\[|\]$/g, "");
  return bare === "localhost" || bare.endsWith(".localhost") || isIP(bare) !== 0;
}

/**
 * A page cannot forge a WebSocket handshake's `Origin`: another site's is refused (cross-site hijacking),
 * and so is a same-origin page not addressed by an IP address or `localhost` (DNS rebinding) unless its origin
 * is listed (`selfUrl`, a reverse proxy). No `Origin` is no browser page (a script on the machine). Pure.
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
