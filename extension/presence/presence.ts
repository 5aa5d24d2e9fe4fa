/**
 * Presence: while a session is active, the runtime tells the server it is alive and whether it is
 * idle or running, so the persona can find live sessions and reach them. Heartbeats go to the server only, never into the
 * session file. One request is in flight at a time; a heartbeat asked for meanwhile is sent once,
 * right after, with the newest state. Stopping sends one best-effort offline.
 *
 * The decisions (when to send, what to send, what counts as activity) are pure functions below;
 * `installPresence` is the thin edge holding the timer, the Pi handlers and the HTTP calls.
 */
import { randomUUID } from "node:crypto";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Heartbeat, HeartbeatAnswer, OfflineAnswer, type SessionRunState } from "../../protocol/sessions.ts";
import { LIMITS, PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import type { Config } from "../config/schema.ts";
import { errorText } from "../../common/errors.ts";
import type { ApiClient } from "../delivery/http-client.ts";
import { asDeliveryError, needsNoWarning } from "../delivery/retry.ts";
import type { Messages } from "../messages.ts";
import { attachable } from "../pi-handlers.ts";
import { modelLabel, projectName } from "../session-labels.ts";

/** The offline call is a courtesy (the server's TTL is the authority), so it never holds up a shutdown for long. */
export const OFFLINE_TIMEOUT_MS = 2_000;
const HEARTBEAT_TIMEOUT_CAP_MS = 10_000;
/**
 * How long a session stays idle before the server hears it: runs that follow each other at once
 * (queued follow-ups, scripted prompts: the next starts within a millisecond, 10 ms at the 90th
 * percentile on a loaded machine) then cost no heartbeat at all. The idle long poll starts only
 * once the server heard idle, so an instruction sent inside this window waits out the rest of it:
 * short, so that wait stays under the instruction latency target (150 ms made the p99 ~150 ms).
 */
export const IDLE_SETTLE_MS = 30;

/** What a started service talks to: the session's client and its configuration, as of the start. */
export interface Connection {
  client: ApiClient;
  config: Pick<Config, "presence" | "command">;
}

// ── Pure decisions ──────────────────────────────────────────────────────────

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

/** Images are claimed only when the model can see them: Pi would otherwise swap them for a placeholder. */
export function modelSupportsImages(model: PresenceSnapshot["model"]): boolean {
  return model?.input.includes("image") ?? false;
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

/** One id per extension runtime, so the server can tell an old runtime of a session from a newer one. */
export function createRuntimeId(): string {
  return `r-${randomUUID()}`;
}

// ── Edge ────────────────────────────────────────────────────────────────────

export interface PresenceDeps {
  runtimeId: string;
  /** The client and configuration of the bound session; undefined when it has none (nothing starts). */
  connection: () => Connection | undefined;
  /** Tells the user once per distinct failure; presence never throws into Pi. */
  report: (message: string) => void;
  /** The texts in the bound session's language. */
  text: () => Messages;
  /** A failed heartbeat as the person should read it (its real cause: not our server, no token here, …); default: its message. */
  explain?: (error: unknown) => string;
  now?: () => number;
  /** Defaults to IDLE_SETTLE_MS. */
  idleSettleMs?: number;
}

export interface Presence {
  /** Starts heartbeating for the session of `ctx`; sends one at once. Idempotent. */
  start(ctx: ExtensionContext): void;
  /** Stops the timer and sends one best-effort offline (bounded: OFFLINE_TIMEOUT_MS). Idempotent. */
  stop(): Promise<void>;
  /** Asks for a heartbeat now (coalesced with one in flight). */
  beat(): void;
  /** Resolves true once the server has accepted this runtime's latest heartbeat, false if presence stops first. */
  whenAccepted(): Promise<boolean>;
  /** Whether the newest heartbeat the server accepted said idle (only then does it hold an idle long poll). */
  heardIdle(): boolean;
  /** Calls `listener` after each accepted heartbeat (the server answers again: what waited for it can go); returns the unsubscribe. */
  onAccepted(listener: () => void): () => void;
  /** Whether the model of the running session can see images (also what claims declare). */
  supportsImages(): boolean;
  /** For the doctor: running, the latest heartbeat accepted, the last failure still unresolved. */
  status(): { running: boolean; accepted: boolean; lastFailure: string | null };
  /** The command protocol the server said in its latest heartbeat answer (2 when it said none). */
  serverCommandProtocol(): number;
}

/**
 * Registers the Pi handlers that feed presence (run state, activity) and returns the controller.
 * Call once from the extension factory; `start`/`stop` follow the session's activation.
 */
export function installPresence(pi: ExtensionAPI, deps: PresenceDeps): Presence {
  const now = deps.now ?? Date.now;
  let connection: { client: ApiClient; intervalMs: number } | undefined;
  let ctx: ExtensionContext | undefined;
  let running = false;
  let loop = IDLE_LOOP;
  let timer: ReturnType<typeof setInterval> | undefined;
  let inFlight: { controller: AbortController; done: Promise<void> } | undefined;
  let activity: Activity = { lastActivityAt: now(), runningTools: new Map() };
  let lastFailure: string | undefined;
  let accepted = false;
  let serverProtocol = 2;
  // The run state of the newest heartbeat sent; cleared when one fails (the server may not know it).
  let heard: SessionRunState | undefined;
  // The run state of the newest heartbeat the server accepted.
  let acceptedState: SessionRunState | undefined;
  const acceptedListeners = new Set<() => void>();
  let settleTimer: ReturnType<typeof setTimeout> | undefined;
  let waiters: ((accepted: boolean) => void)[] = [];

  const settleWaiters = (accepted: boolean) => {
    const pending = waiters;
    waiters = [];
    for (const resolve of pending) resolve(accepted);
  };

  const snapshot = (): PresenceSnapshot | undefined => {
    if (!ctx) return undefined;
    try {
      return {
        sessionId: ctx.sessionManager.getSessionId(),
        runtimeId: deps.runtimeId,
        cwd: ctx.cwd,
        model: ctx.model,
        state: ctx.isIdle() ? "idle" : "running",
        activity,
      };
    } catch {
      // A stale ctx (the runtime was replaced): session_shutdown stops us right after.
      return undefined;
    }
  };

  const send = () => {
    const body = snapshot();
    if (!body || !connection) {
      loop = IDLE_LOOP;
      return;
    }
    const controller = new AbortController();
    heard = body.state;
    const done = connection.client
      .request("POST", "sessions/heartbeat", {
        body: buildHeartbeat(body),
        timeoutMs: Math.min(connection.intervalMs, HEARTBEAT_TIMEOUT_CAP_MS),
        schema: HeartbeatAnswer,
        signal: controller.signal,
      })
      .then(
        (answer) => {
          lastFailure = undefined;
          serverProtocol = answer.command_protocol ?? 2;
          accepted = true;
          acceptedState = body.state;
          settleWaiters(true);
          for (const listener of [...acceptedListeners]) listener();
        },
        (error: unknown) => {
          if (controller.signal.aborted) return;
          accepted = false;
          heard = undefined;
          acceptedState = undefined;
          const message = deps.text().presence.failed((deps.explain ?? errorText)(error));
          // A refused token is told once by the client, an outage by the footer, for every channel at once.
          if (message !== lastFailure && !needsNoWarning(asDeliveryError(error))) deps.report(message);
          lastFailure = message;
        },
      )
      .finally(() => {
        inFlight = undefined;
        step("finished");
      });
    inFlight = { controller, done };
  };

  const step = (trigger: SendTrigger) => {
    if (!running && trigger === "due") return;
    const next = nextSend(loop, trigger);
    loop = next.loop;
    if (next.send && running) send();
    else if (next.send) loop = IDLE_LOOP;
  };

  const beat = () => step("due");
  // Stopped, activity is not tracked (the handlers are off): start() begins afresh.
  const track = (signal: ActivitySignal) => {
    activity = noteActivity(activity, signal, now());
  };

  const cancelSettle = () => {
    clearTimeout(settleTimer);
    settleTimer = undefined;
  };
  const runEdge = (edge: RunEdge) => {
    if (edge === "started") cancelSettle();
    const action = runEdgeAction(edge, heard);
    if (action === "send") beat();
    else if (action === "settle" && settleTimer === undefined) {
      settleTimer = setTimeout(() => {
        settleTimer = undefined;
        if (snapshot()?.state !== heard) beat();
      }, deps.idleSettleMs ?? IDLE_SETTLE_MS);
      settleTimer.unref();
    }
  };

  // Attached only while running: a session that is not switched on runs none of these per turn.
  const handlers = attachable(() => [
    pi.on("agent_start", (_event, c) => {
      ctx = c;
      runEdge("started");
    }),
    pi.on("agent_settled", (_event, c) => {
      ctx = c;
      activity = { ...activity, runningTools: new Map() };
      runEdge("settled");
    }),
    pi.on("model_select", (_event, c) => {
      ctx = c;
      beat();
    }),
    pi.on("message_update", (event) => {
      if (event.message.role === "assistant") track({ kind: "model_output" });
    }),
    pi.on("message_end", (event) => {
      if (event.message.role === "assistant") track({ kind: "model_output" });
    }),
    pi.on("tool_execution_start", (event) => track({ kind: "tool_start", toolCallId: event.toolCallId, toolName: event.toolName })),
    pi.on("tool_execution_end", (event) => track({ kind: "tool_end", toolCallId: event.toolCallId })),
  ]);

  const stop = async () => {
    if (!running) return;
    running = false;
    handlers.set(false);
    accepted = false;
    heard = undefined;
    acceptedState = undefined;
    cancelSettle();
    clearInterval(timer);
    timer = undefined;
    settleWaiters(false);
    const body = snapshot();
    // An answer to a heartbeat still in flight must not land after the offline and revive the entry.
    if (inFlight) {
      inFlight.controller.abort();
      await inFlight.done;
    }
    loop = IDLE_LOOP;
    if (!body || !connection) return;
    try {
      await connection.client.request("POST", "sessions/offline", {
        body: { session_id: body.sessionId, runtime_id: body.runtimeId },
        timeoutMs: OFFLINE_TIMEOUT_MS,
        schema: OfflineAnswer,
      });
    } catch {
      // Best effort by specification: the server forgets the runtime after its TTL anyway.
    }
  };
  return {
    start(c) {
      ctx = c;
      if (running) return;
      const current = deps.connection();
      if (!current) return deps.report(deps.text().presence.noConnection);
      connection = { client: current.client, intervalMs: current.config.presence.heartbeatIntervalMs };
      running = true;
      handlers.set(true);
      lastFailure = undefined;
      activity = { lastActivityAt: now(), runningTools: new Map() };
      timer = setInterval(beat, connection.intervalMs);
      timer.unref();
      beat();
    },
    stop,
    beat,
    whenAccepted: () => {
      if (!running) return Promise.resolve(false);
      return accepted ? Promise.resolve(true) : new Promise((resolve) => waiters.push(resolve));
    },
    heardIdle: () => running && acceptedState === "idle",
    onAccepted(listener) {
      acceptedListeners.add(listener);
      return () => acceptedListeners.delete(listener);
    },
    supportsImages: () => {
      try {
        return modelSupportsImages(ctx?.model);
      } catch {
        return false;
      }
    },
    status: () => ({ running, accepted, lastFailure: lastFailure ?? null }),
    serverCommandProtocol: () => serverProtocol,
  };
}
