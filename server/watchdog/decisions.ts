/** The watchdog sits outside the agent because a stuck session cannot report itself: one notice per stall or vanish episode, from what heartbeats say. */
import { createHash } from "node:crypto";
import { EventBody, type DeliveryRoute } from "../../protocol/events.ts";
import type { Heartbeat, SessionRunState } from "../../protocol/sessions.ts";
import { LIMITS } from "../../protocol/wire.ts";
import type { Say } from "../locales/load.ts";

export interface Watched {
  sessionId: string;
  runtimeId: string;
  project: string;
  state: SessionRunState;
  lastActivityMs: number;
  /** The tool running at the last activity, by name only; null when none was. */
  activity: string | null;
  lastSeenMs: number;
  /** When the server first saw this stretch of `running`: a run that just started is not stalled by an old idle time. */
  runningSinceMs: number | null;
  /** Set while a stall episode's notice has been raised: the activity time it was raised for. */
  stalledAtActivityMs: number | null;
  /** Set when the entry expired while running; the vanish notice is still to be delivered. */
  vanishedAtMs: number | null;
}

export type WatchInput = { kind: "heartbeat"; heartbeat: Heartbeat; atMs: number } | { kind: "offline" } | { kind: "expired"; atMs: number };

export type EpisodeEnd = "activity_resumed" | "idle" | "offline" | "came_back" | "new_runtime";

/** `ended`: an episode that ended with this input; nothing to send, only to record. */
type Observation = { next: Watched | undefined; ended: { episode: "stalled" | "vanished"; reason: EpisodeEnd } | null };

/** How a heartbeat, an offline call or an expiry changes what the watchdog knows. Pure. */
export function observe(prev: Watched | undefined, input: WatchInput): Observation {
  if (input.kind === "offline") {
    return { next: undefined, ended: prev?.stalledAtActivityMs != null ? { episode: "stalled", reason: "offline" } : null };
  }
  if (input.kind === "expired") {
    if (prev?.state !== "running") return { next: undefined, ended: null };
    return { next: { ...prev, vanishedAtMs: input.atMs }, ended: null };
  }
  const { heartbeat, atMs } = input;
  const sameRuntime = prev?.runtimeId === heartbeat.runtime_id;
  const lastActivityMs = Date.parse(heartbeat.last_activity_at);
  const running = heartbeat.state === "running";
  const next: Watched = {
    sessionId: heartbeat.session_id,
    runtimeId: heartbeat.runtime_id,
    project: heartbeat.project,
    state: heartbeat.state,
    lastActivityMs,
    activity: heartbeat.activity ?? null,
    lastSeenMs: atMs,
    runningSinceMs: running ? (sameRuntime && prev?.runningSinceMs != null ? prev.runningSinceMs : atMs) : null,
    stalledAtActivityMs: prev?.stalledAtActivityMs ?? null,
    vanishedAtMs: null,
  };
  let ended: Observation["ended"] = null;
  if (prev?.vanishedAtMs != null) ended = { episode: "vanished", reason: "came_back" };
  if (next.stalledAtActivityMs !== null) {
    const reason: EpisodeEnd | null = !sameRuntime ? "new_runtime" : !running ? "idle" : lastActivityMs > next.stalledAtActivityMs ? "activity_resumed" : null;
    if (reason) {
      next.stalledAtActivityMs = null;
      ended ??= { episode: "stalled", reason };
    }
  }
  return { next, ended };
}

export type Due = { kind: "stalled"; sinceMs: number } | { kind: "vanished" } | null;

export function due(watched: Watched, nowMs: number, thresholds: { stallAfterMs: number }): Due {
  if (watched.vanishedAtMs !== null) return { kind: "vanished" };
  if (watched.state !== "running" || watched.stalledAtActivityMs !== null) return null;
  const sinceMs = Math.max(watched.lastActivityMs, watched.runningSinceMs ?? watched.lastActivityMs);
  return nowMs - sinceMs >= thresholds.stallAfterMs ? { kind: "stalled", sinceMs } : null;
}

export function afterNotice(watched: Watched, notice: Exclude<Due, null>): Watched | undefined {
  return notice.kind === "vanished" ? undefined : { ...watched, stalledAtActivityMs: watched.lastActivityMs };
}

/** The notice as an event. Deterministic id per episode, so a retried submit is a duplicate. */
export function watchdogEvent(watched: Watched, notice: Exclude<Due, null>, nowMs: number, delivery: DeliveryRoute, ttlMs: number, say: Say): EventBody {
  const episodeMs = notice.kind === "stalled" ? notice.sinceMs : watched.vanishedAtMs!;
  const digest = createHash("sha256").update(`${watched.sessionId}\0${watched.runtimeId}\0${episodeMs}`).digest("hex").slice(0, 32);
  const lastActivity = new Date(watched.lastActivityMs).toISOString();
  const doing = watched.activity ? say("anon-notify.watchdog.doing-tool", [watched.activity]) : say("anon-notify.watchdog.doing-nothing");
  const facts = { project: watched.project, lastActivity, doing };
  const summary =
    notice.kind === "stalled"
      ? say("anon-notify.watchdog.stalled", { ...facts, minutes: Math.max(1, Math.round((nowMs - notice.sinceMs) / 60_000)) })
      : say("anon-notify.watchdog.vanished", { ...facts, seconds: Math.round(ttlMs / 1000), lastSeen: new Date(watched.lastSeenMs).toISOString() });
  return warningEvent(nowMs, delivery, {
    event_id: `watchdog:${notice.kind}:${digest}`,
    session_id: watched.sessionId,
    runtime_id: watched.runtimeId,
    source: say("anon-notify.watchdog.source", [watched.project]).slice(0, LIMITS.sourceChars),
    summary: summary.slice(0, LIMITS.summaryChars),
    details: {
      watchdog: notice.kind,
      last_activity_at: lastActivity,
      activity: watched.activity,
      last_seen_at: new Date(watched.lastSeenMs).toISOString(),
      running_since: watched.runningSinceMs === null ? null : new Date(watched.runningSinceMs).toISOString(),
    },
  });
}

/** A watchdog notice: a warning with no task, url or context usage. */
function warningEvent(
  nowMs: number,
  delivery: DeliveryRoute,
  fields: Pick<EventBody, "event_id" | "session_id" | "runtime_id" | "source" | "summary" | "details">,
) {
  return EventBody.parse({ ...fields, task: "", status: "warning", url: null, context_usage: null, created_at: new Date(nowMs).toISOString(), delivery });
}

/** Sessions a grouped notice lists by name; `count` says how many there were in all. */
const LISTED_SESSIONS = 8;
const LISTED_PROJECTS = 5;

/** The vanish notices due in one check, with the sessions each covers: one for all when several vanished (a crash of many runtimes is one message). */
export function vanishedNotices(
  vanished: readonly Watched[],
  nowMs: number,
  delivery: DeliveryRoute,
  ttlMs: number,
  say: Say,
): { event: EventBody; sessions: string[] }[] {
  if (vanished.length === 0) return [];
  if (vanished.length === 1)
    return [{ event: watchdogEvent(vanished[0]!, { kind: "vanished" }, nowMs, delivery, ttlMs, say), sessions: [vanished[0]!.sessionId] }];
  const sorted = [...vanished].sort((a, b) => (a.sessionId < b.sessionId ? -1 : a.sessionId > b.sessionId ? 1 : 0));
  const first = sorted[0]!;
  const digest = createHash("sha256");
  for (const w of sorted) digest.update(`${w.sessionId}\0${w.runtimeId}\0${w.vanishedAtMs}\n`);
  const projects = [...new Set(sorted.map((w) => w.project))];
  const more = projects.length > LISTED_PROJECTS ? say("anon-notify.watchdog.more-projects", [projects.length]) : "";
  const named = projects.slice(0, LISTED_PROJECTS).join(say("anon-notify.watchdog.project-separator")) + more;
  const summary = say("anon-notify.watchdog.many", { count: sorted.length, seconds: Math.round(ttlMs / 1000), projects: named });
  const event = warningEvent(nowMs, delivery, {
    event_id: `watchdog:vanished:${digest.digest("hex").slice(0, 32)}`,
    session_id: first.sessionId,
    runtime_id: first.runtimeId,
    source: say("anon-notify.watchdog.source-all"),
    summary: summary.slice(0, LIMITS.summaryChars),
    details: {
      watchdog: "vanished",
      count: sorted.length,
      sessions: sorted
        .slice(0, LISTED_SESSIONS)
        .map((w) => ({ session_id: w.sessionId, project: w.project, last_seen_at: new Date(w.lastSeenMs).toISOString() })),
    },
  });
  return [{ event, sessions: sorted.map((w) => w.sessionId) }];
}
