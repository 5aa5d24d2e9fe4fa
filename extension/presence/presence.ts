/** Presence: while a session is active, heartbeats tell the server it is alive and idle or running; the answers go into server-facts.ts. */
import { randomUUID } from "node:crypto";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { HeartbeatAnswer, OfflineAnswer, type SessionRunState } from "../../protocol/sessions.ts";
import type { Config } from "../config/schema-rules.ts";
import { errorText } from "../../common/errors.ts";
import type { ApiClient } from "../server-client/http-client.ts";
import { asServerError, needsNoWarning } from "../server-client/retry.ts";
import type { Messages } from "../texts/messages.ts";
import { type Attachable, attachable } from "../pi-handlers.ts";
import type { ServerFacts } from "../server-client/server-facts.ts";
import {
  type Activity,
  type ActivitySignal,
  buildHeartbeat,
  IDLE_LOOP,
  nextSend,
  noteActivity,
  type PresenceSnapshot,
  type RunEdge,
  runEdgeAction,
  type SendTrigger,
} from "./decisions.ts";

/** The offline call is a courtesy (the server's TTL is the authority), so it never holds up a shutdown for long. */
export const OFFLINE_TIMEOUT_MS = 2_000;
const HEARTBEAT_TIMEOUT_CAP_MS = 10_000;
/** How long a session stays idle before the server hears it, so back-to-back runs (10 ms apart at p90) cost no heartbeat. An instruction sent inside
 * it waits out the rest (the idle long poll starts once the server heard idle): short, as 150 ms made the instruction latency's p99 ~150 ms. */
export const IDLE_SETTLE_MS = 30;

/** What a started service talks to: the session's client and its configuration, as of the start. */
export type Connection = { client: ApiClient; config: Pick<Config, "presence" | "command"> };

/** One id per extension runtime, so the server can tell an old runtime of a session from a newer one. */
export function createRuntimeId(): string {
  return `r-${randomUUID()}`;
}

export interface PresenceDeps {
  runtimeId: string;
  /** The client and configuration of the bound session; undefined when it has none (nothing starts). */
  connection: () => Connection | undefined;
  server: ServerFacts;
  /** Tells the user once per distinct failure; presence never throws into Pi. */
  report: (message: string) => void;
  text: () => Messages;
  /** A failed heartbeat as the person should read it (its real cause: not our server, no token here, …); default: its message. */
  explain?: (error: unknown) => string;
  idleSettleMs?: number;
}

/** Build once from the extension factory; `start`/`stop` follow the session's activation, and the Pi handlers that feed presence are attached only while
 * it runs. */
export class Presence {
  readonly #deps: PresenceDeps;
  readonly #handlers: Attachable;
  #connection: { client: Connection["client"]; intervalMs: number } | undefined;
  #ctx: ExtensionContext | undefined;
  #running = false;
  #loop = IDLE_LOOP;
  #timer: ReturnType<typeof setInterval> | undefined;
  #inFlight: { controller: AbortController; done: Promise<void> } | undefined;
  #activity: Activity;
  #lastFailure: string | undefined;
  // The run state of the newest heartbeat sent; cleared when one fails (the server may not know it).
  #heard: SessionRunState | undefined;
  #settleTimer: ReturnType<typeof setTimeout> | undefined;

  constructor(pi: ExtensionAPI, deps: PresenceDeps) {
    this.#deps = deps;
    this.#activity = { lastActivityAt: Date.now(), runningTools: new Map() };
    const modelOutput = (event: { message: { role: string } }) => {
      if (event.message.role === "assistant") this.#track({ kind: "model_output" });
    };
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
      pi.on("message_update", modelOutput),
      pi.on("message_end", modelOutput),
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
    this.#connection = { client: current.client, intervalMs: current.config.presence.heartbeatIntervalMs };
    this.#running = true;
    this.#deps.server.open();
    this.#handlers.set(true);
    this.#lastFailure = undefined;
    this.#activity = { lastActivityAt: Date.now(), runningTools: new Map() };
    this.#timer = setInterval(() => this.beat(), this.#connection.intervalMs).unref();
    this.beat();
  }

  /** Stops the timer and sends one best-effort offline (bounded: OFFLINE_TIMEOUT_MS). Idempotent. */
  async stop(): Promise<void> {
    if (!this.#running) return;
    this.#running = false;
    this.#handlers.set(false);
    this.#heard = undefined;
    this.#deps.server.close();
    this.#cancelSettle();
    clearInterval(this.#timer);
    this.#timer = undefined;
    const body = this.#snapshot();
    // An answer to a heartbeat still in flight must not land after the offline and revive the entry.
    this.#inFlight?.controller.abort();
    await this.#inFlight?.done;
    this.#loop = IDLE_LOOP;
    if (!body || !this.#connection) return;
    // Best effort by specification: the server forgets the runtime after its TTL anyway.
    await this.#connection.client
      .request("POST", "sessions/offline", {
        body: { session_id: body.sessionId, runtime_id: body.runtimeId },
        timeoutMs: OFFLINE_TIMEOUT_MS,
        schema: OfflineAnswer,
      })
      .catch(() => undefined);
  }

  /** Asks for a heartbeat now (coalesced with one in flight). */
  beat(): void {
    this.#step("due");
  }

  /** For the doctor: running, the latest heartbeat accepted, the last failure still unresolved. */
  status(): { running: boolean; accepted: boolean; lastFailure: string | null } {
    return { running: this.#running, accepted: this.#deps.server.accepted(), lastFailure: this.#lastFailure ?? null };
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
    if (!body || !connection) return void (this.#loop = IDLE_LOOP);
    const controller = new AbortController();
    this.#heard = body.state;
    const done = connection.client
      .request("POST", "sessions/heartbeat", {
        body: buildHeartbeat(body),
        timeoutMs: Math.min(connection.intervalMs, HEARTBEAT_TIMEOUT_CAP_MS),
        schema: HeartbeatAnswer,
        signal: controller.signal,
      })
      .then(
        (answer) => {
          this.#lastFailure = undefined;
          this.#deps.server.accept(body.state, answer.command_protocol);
        },
        (error: unknown) => {
          if (controller.signal.aborted) return;
          this.#heard = undefined;
          this.#deps.server.forget();
          const message = this.#deps.text().presence.failed((this.#deps.explain ?? errorText)(error));
          // A refused token is told once by the client, an outage by the footer, for every channel at once.
          if (message !== this.#lastFailure && !needsNoWarning(asServerError(error))) this.#deps.report(message);
          this.#lastFailure = message;
        },
      )
      .finally(() => {
        this.#inFlight = undefined;
        this.#step("finished");
      });
    this.#inFlight = { controller, done };
  }

  // Stopped, activity is not tracked (the handlers are off): start() begins afresh.
  #track(signal: ActivitySignal): void {
    this.#activity = noteActivity(this.#activity, signal, Date.now());
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
      }, this.#deps.idleSettleMs ?? IDLE_SETTLE_MS).unref();
    }
  }
}
