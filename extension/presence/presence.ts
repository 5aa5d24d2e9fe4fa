/** Presence: while a session is active, heartbeats tell the server it is alive and idle or running (over
 * the presence stream when offered, else HTTP); the answers go into server-facts.ts for others to read. */
import { randomUUID } from "node:crypto";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { HeartbeatAnswer, OfflineAnswer, type SessionRunState } from "../../protocol/sessions.ts";
import type { Config } from "../config/schema-rules.ts";
import { errorText } from "../../common/errors.ts";
import type { ApiClient, WebhookClient } from "../server-client/http-client.ts";
import { asServerError, needsNoWarning } from "../server-client/retry.ts";
import type { Messages } from "../texts/messages.ts";
import { type Attachable, attachable } from "../pi-handlers.ts";
import type { ServerFacts } from "../server-client/server-facts.ts";
import {
  type Activity,
  type ActivitySignal,
  beatIntervalMs,
  buildHeartbeat,
  CLOSED_STREAM,
  heartbeatWay,
  IDLE_LOOP,
  nextSend,
  noteActivity,
  type PresenceSnapshot,
  type RunEdge,
  runEdgeAction,
  type SendLoop,
  sendQuiet,
  type SendTrigger,
  shouldOpenStream,
  type StreamLink,
  type StreamSignal,
  streamChanged,
} from "./decisions.ts";
import { HeartbeatStream, StreamLost } from "./stream.ts";

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
  /** Without `socket` (a client that cannot open WebSockets), heartbeats go by HTTP only. */
  client: ApiClient & Partial<Pick<WebhookClient, "socket">>;
  config: Pick<Config, "presence" | "command">;
}

/** One id per extension runtime, so the server can tell an old runtime of a session from a newer one. */
export function createRuntimeId(): string {
  return `r-${randomUUID()}`;
}

export interface PresenceDeps {
  runtimeId: string;
  /** The client and configuration of the bound session; undefined when it has none (nothing starts). */
  connection: () => Connection | undefined;
  /** Where what the server answers is recorded. */
  server: ServerFacts;
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

/**
 * Registers nothing until started: the Pi handlers that feed presence (run state, activity) are
 * attached only while it runs. Build once from the extension factory; `start`/`stop` follow the
 * session's activation.
 */
export class Presence {
  readonly #deps: PresenceDeps;
  readonly #now: () => number;
  readonly #server: ServerFacts;
  readonly #handlers: Attachable;
  #connection: { client: Connection["client"]; intervalMs: number } | undefined;
  #ctx: ExtensionContext | undefined;
  #running = false;
  #loop: SendLoop = IDLE_LOOP;
  #timer: ReturnType<typeof setInterval> | undefined;
  /** The interval `#timer` beats at: the one in effect when it was armed. */
  #timerMs = 0;
  #inFlight: { controller: AbortController; done: Promise<void> } | undefined;
  #activity: Activity;
  #lastFailure: string | undefined;
  // The run state of the newest heartbeat sent; cleared when one fails (the server may not know it).
  #heard: SessionRunState | undefined;
  #settleTimer: ReturnType<typeof setTimeout> | undefined;
  #link: StreamLink = CLOSED_STREAM;
  #stream: HeartbeatStream | undefined;

  constructor(pi: ExtensionAPI, deps: PresenceDeps) {
    this.#deps = deps;
    this.#now = deps.now ?? Date.now;
    this.#server = deps.server;
    this.#activity = { lastActivityAt: this.#now(), runningTools: new Map() };
    // Attached only while running: a session that is not switched on runs none of these per turn.
    this.#handlers = attachable(() => [
      pi.on("agent_start", (_event, c) => {
        this.#ctx = c;
        this.#runEdge("started");
      }),
      pi.on("agent_settled", (_event, c) => {
        this.#ctx = c;
        this.#activity = { ...this.#activity, runningTools: new Map() };
        this.#runEdge("settled");
      }),
      pi.on("model_select", (_event, c) => {
        this.#ctx = c;
        this.beat();
      }),
      pi.on("message_update", (event) => {
        if (event.message.role === "assistant") this.#track({ kind: "model_output" });
      }),
      pi.on("message_end", (event) => {
        if (event.message.role === "assistant") this.#track({ kind: "model_output" });
      }),
      pi.on("tool_execution_start", (event) => this.#track({ kind: "tool_start", toolCallId: event.toolCallId, toolName: event.toolName })),
      pi.on("tool_execution_end", (event) => this.#track({ kind: "tool_end", toolCallId: event.toolCallId })),
    ]);
  }

  /** Starts heartbeating for the session of `ctx`; sends one at once. Idempotent. */
  start(ctx: ExtensionContext): void {
    this.#ctx = ctx;
    if (this.#running) return;
    const current = this.#deps.connection();
    if (!current) return this.#deps.report(this.#deps.text().presence.noConnection);
    const connection = { client: current.client, intervalMs: current.config.presence.heartbeatIntervalMs };
    this.#connection = connection;
    this.#running = true;
    this.#server.open();
    this.#handlers.set(true);
    this.#lastFailure = undefined;
    this.#link = CLOSED_STREAM;
    this.#activity = { lastActivityAt: this.#now(), runningTools: new Map() };
    this.#armTimer();
    this.beat();
  }

  /** Stops the timer and sends one best-effort offline (bounded: OFFLINE_TIMEOUT_MS). Idempotent. */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#handlers.set(false);
    this.#heard = undefined;
    this.#server.close();
    this.#cancelSettle();
    clearInterval(this.#timer);
    this.#timer = undefined;
    const body = this.#snapshot();
    // An answer to a heartbeat still in flight must not land after the offline and revive the entry.
    this.#inFlight?.controller.abort();
    // Closing the stream is not going offline (the offline below is): it only ends the socket.
    this.#stream?.close();
    this.#stream = undefined;
    await this.#inFlight?.done;
    this.#loop = IDLE_LOOP;
    if (!body || !this.#connection) return;
    try {
      await this.#connection.client.request("POST", "sessions/offline", {
        body: { session_id: body.sessionId, runtime_id: body.runtimeId },
        timeoutMs: OFFLINE_TIMEOUT_MS,
        schema: OfflineAnswer,
      });
    } catch {
      // Best effort by specification: the server forgets the runtime after its TTL anyway.
    }
  }

  /** Asks for a heartbeat now (coalesced with one in flight). */
  beat(): void {
    this.#step("due");
  }

  /** For the doctor: running, the latest heartbeat accepted, the last failure still unresolved, which way heartbeats go. */
  status(): { running: boolean; accepted: boolean; lastFailure: string | null; way: "stream" | "http" } {
    return { running: this.#running, accepted: this.#server.accepted(), lastFailure: this.#lastFailure ?? null, way: heartbeatWay(this.#link) };
  }

  #snapshot(): PresenceSnapshot | undefined {
    const ctx = this.#ctx;
    if (!ctx) return undefined;
    try {
      return {
        sessionId: ctx.sessionManager.getSessionId(),
        runtimeId: this.#deps.runtimeId,
        cwd: ctx.cwd,
        model: ctx.model,
        state: ctx.isIdle() ? "idle" : "running",
        activity: this.#activity,
      };
    } catch {
      // A stale ctx (the runtime was replaced): session_shutdown stops us right after.
      return undefined;
    }
  }

  #step(trigger: SendTrigger): void {
    if (!this.#running && trigger === "due") return;
    const next = nextSend(this.#loop, trigger);
    this.#loop = next.loop;
    if (next.send && this.#running) this.#send();
    else if (next.send) this.#loop = IDLE_LOOP;
  }

  #send(): void {
    const body = this.#snapshot();
    const connection = this.#connection;
    if (!body || !connection) {
      this.#loop = IDLE_LOOP;
      return;
    }
    const controller = new AbortController();
    this.#heard = body.state;
    const heartbeat = buildHeartbeat(body);
    const timeoutMs = Math.min(connection.intervalMs, HEARTBEAT_TIMEOUT_CAP_MS);
    const overHttp = () =>
      connection.client
        .request("POST", "sessions/heartbeat", { body: heartbeat, timeoutMs, schema: HeartbeatAnswer, signal: controller.signal })
        .then((answer) => {
          this.#streamSignal({ kind: "http_answer", offered: answer.presence_stream === true });
          this.#openStream(connection.client);
          return answer;
        });
    const stream = heartbeatWay(this.#link) === "stream" ? this.#stream : undefined;
    // Quiet (answered only if refused) when the answer would change nothing: the state the server already accepted.
    const quiet = stream !== undefined && sendQuiet(this.#link, heartbeat, this.#now());
    const sent: Promise<HeartbeatAnswer | undefined> = stream
      ? stream.beat(heartbeat, timeoutMs, quiet).then(
          (answer) => {
            if (answer) {
              const { quiet_beats: quietBeats = false, ttl_ms: ttlMs } = answer;
              this.#streamSignal({ kind: "answered", beat: heartbeat, quietBeats, ttlMs, nowMs: this.#now() });
            }
            return answer;
          },
          // A heartbeat the stream lost goes by HTTP at once; a refusal over it is a refusal like any.
          (error: unknown) => (error instanceof StreamLost && !controller.signal.aborted ? overHttp() : Promise.reject(error)),
        )
      : overHttp();
    const done = sent
      .then(
        (answer) => {
          this.#lastFailure = undefined;
          // A quiet heartbeat (written, no answer) said what the server last accepted: nothing to record.
          if (answer) this.#server.accept(body.state, answer.command_protocol);
        },
        (error: unknown) => {
          if (!controller.signal.aborted) this.#failed(error);
        },
      )
      .finally(() => {
        this.#inFlight = undefined;
        this.#step("finished");
      });
    this.#inFlight = { controller, done };
  }

  /** A heartbeat failed or was refused (a quiet one's refusal too, whenever it comes): told the same way. */
  #failed(error: unknown): void {
    this.#heard = undefined;
    this.#server.forget();
    this.#streamSignal({ kind: "refused" });
    const message = this.#deps.text().presence.failed((this.#deps.explain ?? errorText)(error));
    // A refused token is told once by the client, an outage by the footer, for every channel at once.
    if (message !== this.#lastFailure && !needsNoWarning(asServerError(error))) this.#deps.report(message);
    this.#lastFailure = message;
  }

  #streamSignal(signal: StreamSignal): void {
    this.#link = streamChanged(this.#link, signal);
    this.#armTimer();
  }

  /** Arms the timer, again when the interval in effect changed (a stream lost: the configured one, at once). */
  #armTimer(): void {
    const connection = this.#connection;
    if (!this.#running || !connection) return;
    const intervalMs = beatIntervalMs(this.#link, connection.intervalMs);
    if (this.#timer !== undefined && intervalMs === this.#timerMs) return;
    clearInterval(this.#timer);
    this.#timerMs = intervalMs;
    this.#timer = setInterval(() => this.beat(), intervalMs);
    this.#timer.unref();
  }

  /** Opens the presence stream when the server offers it and its retry time has come; never waits for it. */
  #openStream(client: Connection["client"]): void {
    if (!this.#running || !client.socket || !shouldOpenStream(this.#link, this.#now())) return;
    this.#streamSignal({ kind: "opening" });
    let socket: ReturnType<NonNullable<Connection["client"]["socket"]>>;
    try {
      socket = client.socket("sessions/stream");
    } catch {
      // An endpoint undici cannot make a WebSocket URL of: HTTP goes on, the stream is tried later.
      return this.#streamSignal({ kind: "lost", nowMs: this.#now() });
    }
    const stream: HeartbeatStream = new HeartbeatStream(
      socket,
      {
        opened: () => {
          if (this.#stream === stream) this.#streamSignal({ kind: "opened" });
        },
        lost: () => {
          if (this.#stream !== stream) return;
          this.#stream = undefined;
          this.#streamSignal({ kind: "lost", nowMs: this.#now() });
        },
        refused: (error) => {
          if (this.#stream === stream && this.#running) this.#failed(error);
        },
      },
      this.#now,
    );
    this.#stream = stream;
  }

  // Stopped, activity is not tracked (the handlers are off): start() begins afresh.
  #track(signal: ActivitySignal): void {
    this.#activity = noteActivity(this.#activity, signal, this.#now());
  }

  #cancelSettle(): void {
    clearTimeout(this.#settleTimer);
    this.#settleTimer = undefined;
  }

  #runEdge(edge: RunEdge): void {
    if (edge === "started") this.#cancelSettle();
    const action = runEdgeAction(edge, this.#heard);
    if (action === "send") this.beat();
    else if (action === "settle" && this.#settleTimer === undefined) {
      this.#settleTimer = setTimeout(() => {
        this.#settleTimer = undefined;
        if (this.#snapshot()?.state !== this.#heard) this.beat();
      }, this.#deps.idleSettleMs ?? IDLE_SETTLE_MS);
      this.#settleTimer.unref();
    }
  }
}
