/** When a heartbeat is sent (one in flight, the newest state once after it), what a run edge asks for, what counts as activity. */
import { Heartbeat, type SessionRunState } from "../../protocol/sessions.ts";
import { LIMITS, PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { modelLabel, modelSupportsImages, projectName } from "../session/label-rules.ts";

/** The send loop: `resend` means a newer state was asked for while a request was in flight. */
export type SendLoop = { inFlight: boolean; resend: boolean };
export const IDLE_LOOP: SendLoop = { inFlight: false, resend: false };

/** `due`: a timer tick or an urgent change wants a heartbeat; `finished`: the request in flight ended. */
export type SendTrigger = "due" | "finished";

export function nextSend(loop: SendLoop, trigger: SendTrigger): { loop: SendLoop; send: boolean } {
  if (trigger === "due") {
    return loop.inFlight ? { loop: { inFlight: true, resend: true }, send: false } : { loop: { inFlight: true, resend: false }, send: true };
  }
  return loop.resend ? { loop: { inFlight: true, resend: false }, send: true } : { loop: IDLE_LOOP, send: false };
}

export type RunEdge = "started" | "settled";

/** What a run edge asks for, given the state the server last heard (undefined: unknown or failed). A start is sent at once (it ends the server's idle
 * long poll); a settle waits IDLE_SETTLE_MS, so a run that starts within it leaves the server's state untouched. */
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
  return [...activity.runningTools.values()].at(-1)?.slice(0, LIMITS.modelChars) ?? null;
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
