/** When a heartbeat is sent (one in flight, the newest state once after it), what a run edge asks for,
 * what counts as activity, and the heartbeat's body. */
import { Heartbeat, type SessionRunState } from "../../protocol/sessions.ts";
import { LIMITS, PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { modelLabel, modelSupportsImages, projectName } from "../session/label-rules.ts";

/** The send loop: `resend` means a newer state was asked for while a request was in flight. */
export interface SendLoop {
  inFlight: boolean;
  resend: boolean;
}
export const IDLE_LOOP: SendLoop = { inFlight: false, resend: false };

/** `due`: a timer tick or an urgent change wants a heartbeat; `finished`: the request in flight ended. */
export type SendTrigger = "due" | "finished";

export function nextSend(loop: SendLoop, trigger: SendTrigger): { loop: SendLoop; send: boolean } {
  if (trigger === "due") {
    return loop.inFlight ? { loop: { inFlight: true, resend: true }, send: false } : { loop: { inFlight: true, resend: false }, send: true };
  }
  return loop.resend ? { loop: { inFlight: true, resend: false }, send: true } : { loop: IDLE_LOOP, send: false };
}

/** A run starting or settling. */
export type RunEdge = "started" | "settled";

/**
 * What a run edge asks for, given the state the server last heard (undefined: unknown, or that
 * heartbeat failed). A start is sent at once: it ends the idle long poll the server may hold. A
 * settle waits IDLE_SETTLE_MS, so a run that starts within it leaves the server's state untouched.
 */
export function runEdgeAction(edge: RunEdge, heard: SessionRunState | undefined): "send" | "settle" | "none" {
  if (edge === "started") return heard === "running" ? "none" : "send";
  return heard === "idle" ? "none" : "settle";
}

/** What the session was last seen doing. Only real work moves `lastActivityAt`, never the timer. */
export interface Activity {
  lastActivityAt: number;
  /** Tools running now, by call id, in start order: the newest names the activity. */
  runningTools: ReadonlyMap<string, string>;
}

export type ActivitySignal = { kind: "model_output" } | { kind: "tool_start"; toolCallId: string; toolName: string } | { kind: "tool_end"; toolCallId: string };

export function noteActivity(activity: Activity, signal: ActivitySignal, now: number): Activity {
  if (signal.kind === "model_output") return { ...activity, lastActivityAt: now };
  const runningTools = new Map(activity.runningTools);
  if (signal.kind === "tool_start") runningTools.set(signal.toolCallId, signal.toolName);
  else runningTools.delete(signal.toolCallId);
  return { lastActivityAt: now, runningTools };
}

export function currentTool(activity: Activity): string | null {
  let newest: string | null = null;
  for (const name of activity.runningTools.values()) newest = name;
  return newest === null ? null : newest.slice(0, LIMITS.modelChars);
}

export interface PresenceSnapshot {
  sessionId: string;
  runtimeId: string;
  cwd: string;
  model: { provider: string; id: string; input: readonly string[] } | undefined;
  state: SessionRunState;
  activity: Activity;
}

export function buildHeartbeat(snapshot: PresenceSnapshot): Heartbeat {
  const model = modelLabel(snapshot.model)?.slice(0, LIMITS.modelChars) ?? null;
  return Heartbeat.parse({
    session_id: snapshot.sessionId,
    runtime_id: snapshot.runtimeId,
    project: projectName(snapshot.cwd),
    model,
    state: snapshot.state,
    supports_images: modelSupportsImages(snapshot.model),
    command_protocol: PROTOCOL_VERSIONS.commands,
    last_activity_at: new Date(snapshot.activity.lastActivityAt).toISOString(),
    activity: currentTool(snapshot.activity),
  });
}

/**
 * The presence stream as presence sees it (docs/protocol.md, "The presence stream"): whether the
 * server offers it, whether it is open, and when to try it again after it failed to open or dropped.
 */
export interface StreamLink {
  /** The newest HTTP heartbeat answer said `presence_stream: true`. */
  offered: boolean;
  state: "closed" | "opening" | "open";
  /** Failed opens and drops since a heartbeat was last answered over it. */
  failures: number;
  /** Not opened again before this time (ms). */
  retryAtMs: number;
  /**
   * What this stream's newest answer accepted, when it said `quiet_beats`: a heartbeat saying the
   * same may go quiet until `untilMs` (one TTL after that answer, so a stream that stalls without
   * closing is still found by the next answered one). Undefined: every heartbeat is answered.
   */
  quiet: QuietBasis | undefined;
}

export interface QuietBasis {
  state: SessionRunState;
  activity: string | null;
  untilMs: number;
  /** The `ttl_ms` of that answer. */
  ttlMs: number;
}

export const CLOSED_STREAM: StreamLink = { offered: false, state: "closed", failures: 0, retryAtMs: 0, quiet: undefined };
export const STREAM_RETRY_FIRST_MS = 1_000;
export const STREAM_RETRY_MAX_MS = 60_000;

export type StreamSignal =
  | { kind: "http_answer"; offered: boolean }
  | { kind: "opening" }
  | { kind: "opened" }
  /** A heartbeat answered over it: `quietBeats` and `ttlMs` as that answer said. */
  | { kind: "answered"; beat: Pick<Heartbeat, "state" | "activity">; quietBeats: boolean; ttlMs: number; nowMs: number }
  /** A heartbeat was refused (either way): the next ones are answered until one is accepted again. */
  | { kind: "refused" }
  /** It could not be opened, or it dropped, or a heartbeat over it got no answer: HTTP until the retry. */
  | { kind: "lost"; nowMs: number };

export function streamChanged(link: StreamLink, signal: StreamSignal): StreamLink {
  switch (signal.kind) {
    case "http_answer":
      return { ...link, offered: signal.offered };
    // A new stream's first heartbeat is answered.
    case "opening":
      return { ...link, state: "opening", quiet: undefined };
    case "opened":
      return { ...link, state: "open", quiet: undefined };
    case "answered": {
      const { beat, quietBeats, ttlMs, nowMs } = signal;
      const quiet = quietBeats ? { state: beat.state, activity: beat.activity ?? null, untilMs: nowMs + ttlMs, ttlMs } : undefined;
      return { ...link, failures: 0, quiet };
    }
    case "refused":
      return { ...link, quiet: undefined };
    case "lost": {
      const waitMs = Math.min(STREAM_RETRY_MAX_MS, STREAM_RETRY_FIRST_MS * 2 ** link.failures);
      return { ...link, state: "closed", failures: link.failures + 1, retryAtMs: signal.nowMs + waitMs, quiet: undefined };
    }
  }
}

/**
 * Whether this heartbeat goes quiet (docs/protocol.md, "Quiet frames": answered only if refused):
 * only over the open stream, and only when its answer would change nothing presence needs, i.e. it
 * says the run state and activity the stream's newest answer accepted, within one TTL of it.
 */
export function sendQuiet(link: StreamLink, beat: Pick<Heartbeat, "state" | "activity">, nowMs: number): boolean {
  const basis = link.quiet;
  return link.state === "open" && basis !== undefined && basis.state === beat.state && basis.activity === (beat.activity ?? null) && nowMs < basis.untilMs;
}

/**
 * How often the timer beats (docs/protocol.md, "Cadence"): `configuredMs`, except over an open stream
 * whose newest answer said `quiet_beats`, where a beat cannot be lost silently (a frame that does not
 * arrive means the stream closed, and that beat goes by HTTP at once), so one spare beat per TTL is
 * enough: every half TTL, never more often than configured.
 */
export function beatIntervalMs(link: StreamLink, configuredMs: number): number {
  return link.state === "open" && link.quiet !== undefined ? Math.max(configuredMs, Math.floor(link.quiet.ttlMs / 2)) : configuredMs;
}

/** Which way the next heartbeat goes: over the stream only while it is open. */
export function heartbeatWay(link: StreamLink): "stream" | "http" {
  return link.state === "open" ? "stream" : "http";
}

/** Whether to open the stream now: offered, closed, and its retry time has come. */
export function shouldOpenStream(link: StreamLink, nowMs: number): boolean {
  return link.offered && link.state === "closed" && nowMs >= link.retryAtMs;
}
