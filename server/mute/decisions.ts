/** Which notices break through a mute, which mutes hold a session, how long a typed mute lasts, and the digest held notices become. */
import { createHash } from "node:crypto";
import { isServerEventId, type DeliveryRoute, type EventBody } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { statusLabel } from "../locales/labels.ts";
import { saidSummary } from "../locales/said.ts";
import { countText, type Say } from "../locales/load.ts";

export const URGENT_KINDS = ["failed", "watchdog", "approval", "needs_you"] as const;
export type UrgentKind = (typeof URGENT_KINDS)[number];

const { muteDefaultMinutes, muteMaxMinutes } = LIMITS;

/** A stored mute: of one session, or of all (`session_id` null). Ended once `until` has passed. */
export type Mute = { session_id: string | null; until: Date };

export function scopeOf(sessionId: string | null): string {
  return sessionId ?? "*";
}

/** Whether a notice breaks through a mute (failed run, watchdog, approval, needs-you), each only if `breakThrough` lists it; watchdog and approval
 * notices count only with the server's own event ids, which agents cannot use. */
export function isUrgent(event: Pick<EventBody, "event_id" | "status" | "details">, breakThrough: readonly UrgentKind[]): boolean {
  const details = event.details ?? {};
  const serverMade = isServerEventId(event.event_id);
  const kinds: Record<UrgentKind, boolean> = {
    failed: event.status === "failed",
    watchdog: serverMade && details.watchdog !== undefined && details.watchdog !== null,
    approval: serverMade && details.approval !== undefined && details.approval !== null,
    needs_you: details.needs_you === true,
  };
  return breakThrough.some((kind) => kinds[kind]);
}

/** The mutes that hold `sessionId`'s notices: a mute of it or of all, still running or ended but not yet released. */
export function covering(mutes: readonly Mute[], sessionId: string): Mute[] {
  return mutes.filter((mute) => mute.session_id === null || mute.session_id === sessionId);
}

export function isMuted(mutes: readonly Mute[], sessionId: string, now: Date): boolean {
  return covering(mutes, sessionId).some((mute) => mute.until > now);
}

export function muteUntil(now: Date, minutes: number | undefined): Date {
  const bounded = Math.min(Math.max(1, Math.round(minutes ?? muteDefaultMinutes)), muteMaxMinutes);
  return new Date(now.getTime() + bounded * 60_000);
}

const UNIT_MINUTES: Record<string, number> = { m: 1, min: 1, h: 60, d: 24 * 60, 分: 1, 分钟: 1, 小时: 60, 时: 60, 天: 24 * 60 };

/** Minutes from what a person types (`30m`, `2h`, `1d`, `1h30m`, `90`, `2小时`); `null` outside 1 minute … 7 days. */
export function parseDuration(text: string): number | null {
  const minutes = durationMinutes(text);
  return minutes !== null && minutes >= 1 && minutes <= muteMaxMinutes ? minutes : null;
}

/** Whether `text` is written as a duration at all (in range or not), rather than, say, a session. */
export function looksLikeDuration(text: string): boolean {
  return durationMinutes(text) !== null;
}

function durationMinutes(text: string): number | null {
  const input = text.trim().toLowerCase().replace(/\s+/g, "");
  if (/^\d+$/.test(input)) return Number(input);
  const parts = [...input.matchAll(/(\d+)(min|m|h|d|分钟|分|小时|时|天)/g)];
  if (parts.length === 0 || parts.map((p) => p[0]).join("") !== input) return null;
  return parts.reduce((sum, p) => sum + Number(p[1]) * UNIT_MINUTES[p[2]!]!, 0);
}

const LINE_SUMMARY_CHARS = 80;
/** At most this many notices are listed one by one; the rest are counted. */
const LISTED = 10;

function digestLines(events: readonly EventBody[], say: Say): string[] {
  const lines = events.slice(0, LISTED).map((e, i) => {
    const summary = saidSummary(e, say).replace(/\s+/g, " ").trim();
    const short = summary.length > LINE_SUMMARY_CHARS ? `${summary.slice(0, LINE_SUMMARY_CHARS - 1)}…` : summary;
    const tail = short ? say("anon-notify.digest.line-summary", [short]) : "";
    return say("anon-notify.digest.line", { n: i + 1, status: statusLabel(e.status, say), source: e.source, summary: tail });
  });
  if (events.length > LISTED) lines.push(say("anon-notify.digest.more", [events.length - LISTED]));
  return lines;
}

/** The direct message a route's held notices become: one short text, in the language `say` speaks. */
export function digestText(events: readonly EventBody[], say: Say): string {
  const sessions = new Set(events.map((e) => e.session_id));
  const hint = say(sessions.size === 1 ? "anon-notify.digest.hint-one" : "anon-notify.digest.hint-many");
  return [say("anon-notify.digest.header", [events.length]), ...digestLines(events, say), hint].join("\n");
}

/** The persona's digest: one event listing the held notices, its details naming each, so the persona can still answer any with `agent_command`. */
export function digestEvent(events: readonly EventBody[], route: DeliveryRoute, now: Date, say: Say): EventBody {
  const ids = events.map((e) => e.event_id);
  const sessions = [...new Set(events.map((e) => e.session_id))];
  const entries = events.slice(0, LISTED).map((e) => ({ event_id: e.event_id, session_id: e.session_id, status: e.status }));
  const summary = [countText(say, "anon-notify.digest.summary", events.length), ...digestLines(events, say)].join("\n");
  return {
    event_id: `mute-digest:${createHash("sha256").update(ids.join("\n")).digest("hex").slice(0, 32)}`,
    session_id: sessions.length === 1 ? sessions[0]! : "mute-digest",
    source: say("anon-notify.digest.source"),
    task: "",
    status: "info",
    summary: summary.slice(0, LIMITS.summaryChars),
    details: { mute_digest: { count: events.length, events: entries } },
    url: null,
    context_usage: null,
    created_at: now.toISOString(),
    delivery: route,
  };
}
