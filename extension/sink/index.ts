/** The local desktop sink (docs/local-sink.md): a one-way channel to an app on this machine when `sink.enabled`, whatever `/anon-notify` says. */
import { randomUUID } from "node:crypto";
import { debuglog } from "node:util";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { isSubagent } from "../../activation.ts";
import type { Config } from "../config/schema-rules.ts";
import type { RunOutcome } from "../../lifecycle.ts";
import { type Observation, type RecordedRun, runRecorderFor } from "../run-recorder.ts";
import { modelLabel, projectName } from "../session/label-rules.ts";
import type { SinkEnvelope, SinkEventType } from "../../protocol/sink.ts";
import { createSinkClient } from "./client.ts";
import { onRoundSettled, onSettleQuiet, roundEndOf, type CompletedRound, type Round } from "./hold-rules.ts";
import { buildSinkEnvelope, buildSinkPayload } from "./payload-rules.ts";
import { createSinkQueue } from "./queue.ts";
import { ensureSinkToken, readSinkToken } from "./token.ts";
import { errorText } from "../../common/errors.ts";
import { localeLanguage, messagesFor, type Messages } from "../texts/messages.ts";

export type SinkConfig = Config["sink"];

/** How long quitting may wait for the queue to reach a responsive app; a hung one is cut off. */
export const SINK_SHUTDOWN_DRAIN_MS = 250;
/** How often a settle that left the session busy without a new run is looked at again. */
const SETTLE_RECHECK_MS = 50;

export interface SinkOptions {
  /** The chat channel's subagent verdict, so both channels suppress the same sessions. */
  isSubagent?: (ctx: ExtensionContext) => boolean;
  /** Where a configuration problem (an unusable token file) is told to the user; stderr by default. */
  warn?: (message: string) => void;
  debug?: (line: string) => void;
  text?: Messages;
}

export type InstalledSink = Sink;

const installed = new WeakMap<ExtensionAPI, InstalledSink>();

/** Subscribes the sink when `config.enabled`, else installs nothing; it closes itself at `session_shutdown`. A token file problem is told once through
 * `warn` and the sink stays off; an absent, slow or refusing app gets one debug line. */
export function installSink(pi: ExtensionAPI, config: SinkConfig, options: SinkOptions = {}): InstalledSink | undefined {
  // One sink per Pi binding, even when session_start comes twice without a shutdown (Pi 0.87.1's RPC new_session): the older one stops at once.
  void installed.get(pi)?.close();
  installed.delete(pi);
  if (!config.enabled) return undefined;
  let token: string;
  try {
    token = ensureSinkToken(config.tokenFile);
  } catch (error) {
    const warn = options.warn ?? ((message: string) => process.stderr.write(`[anon-notify] ${message}\n`));
    const text = options.text ?? messagesFor(localeLanguage(process.env));
    warn(text.sink.tokenUnavailable(config.tokenFile, errorText(error)));
    return undefined;
  }
  const sink = new Sink(pi, config, token, options);
  installed.set(pi, sink);
  return sink;
}

/** One enabled sink: the run recorder's observer, the queue with its one worker, and the socket client. */
class Sink {
  readonly queue: ReturnType<typeof createSinkQueue<SinkEnvelope>>;
  readonly #config: SinkConfig;
  readonly #subagent: (ctx: ExtensionContext) => boolean;
  readonly #client: ReturnType<typeof createSinkClient>;
  readonly #observation: Observation;
  readonly #offs: (() => void)[];
  #token: string;
  #failureLogged = false;
  #sessionId = "";
  #unit: { run_id: string; project: string; model: string | undefined } | null = null;
  /** The recorder's current run, while this sink follows it. */
  #round: RecordedRun | null = null;
  readonly #tools = new Map<string, { tool: string; startedAt: number }>();
  #held: CompletedRound | null = null;
  #pendingPrompt: string | undefined;
  #suppressed: boolean | undefined;
  #closed = false;

  constructor(pi: ExtensionAPI, config: SinkConfig, token: string, options: SinkOptions) {
    this.#config = config;
    this.#token = token;
    // Without the caller's verdict: the chat channel's subagent rule with its defaults.
    this.#subagent =
      options.isSubagent ??
      ((ctx) => isSubagent({ mode: ctx.mode, sessionFile: ctx.sessionManager.getSessionFile(), optOutFlag: false, env: process.env }, true));
    const debug = options.debug ?? debuglog("anon-notify-sink");
    this.#client = createSinkClient(config.socket);
    this.queue = createSinkQueue<SinkEnvelope>(async (envelope) => {
      let result = await this.#client.post(envelope, this.#token);
      if (result.status === 401) {
        // The app may have created the shared file after we read it; read it again, never rewrite it.
        const fresh = readTokenQuietly(config.tokenFile);
        if (fresh && fresh !== this.#token) {
          this.#token = fresh;
          result = await this.#client.post(envelope, this.#token);
        }
      }
      if (!result.ok && !this.#failureLogged) {
        this.#failureLogged = true;
        debug(`desktop sink ${config.socket}: ${result.reason}; events are dropped while it fails (logged once)`);
      }
    });
    // The sink reports how each run ended, so it always needs the exact outcome.
    this.#observation = runRecorderFor(pi).observe(
      {
        start: (run, ctx) => this.#start(run, ctx),
        toolStart: (run, event) => {
          if (run !== this.#round || !this.#unit) return;
          this.#tools.set(event.toolCallId, { tool: event.toolName, startedAt: Date.now() });
          this.#emit("tool.started", { run_id: this.#unit.run_id, tool_call_id: event.toolCallId, tool: event.toolName });
        },
        toolEnd: (run, event, ctx) => {
          if (run === this.#round && this.#unit) this.#toolDone(event.toolCallId, event.toolName, !event.isError && !ctx.signal?.aborted, Date.now());
        },
        settled: (settled, ctx) => this.#settled(settled, ctx),
      },
      { exact: true },
    );
    this.#offs = [
      pi.on("before_agent_start", (event) => {
        this.#pendingPrompt = event.prompt;
      }),
      pi.on("session_shutdown", async () => {
        await this.close();
      }),
    ];
  }

  async flush(): Promise<void> {
    // The release check runs on the turn after agent_settled; wait for it, then for the worker.
    await new Promise((resolve) => setImmediate(resolve));
    await this.queue.idle();
  }

  async close(): Promise<void> {
    if (this.#closed) return;
    const now = Date.now();
    const round = this.#round;
    // Quitting mid-run cancels it; a held completion is released: neither may stay on "working".
    const ended = round ? onRoundSettled(this.#held, { kind: "cancelled", duration_ms: now - round.facts.startedAt }).emit : this.#held;
    if (round) this.#finishTools(now);
    if (ended) this.#emitTerminal(ended);
    this.#round = null;
    this.#held = null;
    this.#closed = true;
    this.#observation.close();
    for (const off of this.#offs) off();
    await this.queue.close(SINK_SHUTDOWN_DRAIN_MS);
    await this.#client.destroy();
  }

  #start(run: RecordedRun, ctx: ExtensionContext): void {
    if (this.#closed) return;
    this.#suppressed ??= this.#subagent(ctx);
    // A subagent's runs never reach the app: stop observing, which costs its turns nothing.
    if (this.#suppressed) return this.#observation.close();
    this.#sessionId ||= ctx.sessionManager.getSessionId();
    this.#round = run;
    if (this.#unit) return;
    this.#unit = { run_id: randomUUID(), project: projectName(ctx.cwd), model: modelLabel(ctx.model) ?? undefined };
    this.#emit("run.started", { ...this.#unit, agent_name: ctx.sessionManager.getSessionName(), prompt: this.#pendingPrompt });
    this.#pendingPrompt = undefined;
  }

  #settled(settled: { run: RecordedRun; outcome: RunOutcome } | undefined, ctx: ExtensionContext): void {
    if (this.#closed || this.#suppressed) return;
    const r = this.#round;
    this.#round = null;
    if (r && settled?.run === r) {
      const now = Date.now();
      this.#finishTools(now);
      const ended: Round = {
        ...roundEndOf(settled.outcome, r.answer),
        duration_ms: now - r.facts.startedAt,
        agent_name: ctx.sessionManager.getSessionName(),
      };
      const decision = onRoundSettled(this.#held, ended);
      this.#held = decision.held;
      if (decision.emit) this.#emitTerminal(decision.emit);
    }
    if (!this.#held) return;
    // Work requested from a settled handler starts right after all settled handlers return; only then is it known whether this settle was the last.
    const settleQuiet = () => {
      if (this.#closed) return;
      // Busy but no run yet (a run still starting, a compaction): look again, never hold blindly.
      if (this.#round === null && !idle(ctx)) return void setTimeout(settleQuiet, SETTLE_RECHECK_MS).unref();
      const decision = onSettleQuiet(this.#held, this.#round !== null);
      this.#held = decision.held;
      if (decision.emit) this.#emitTerminal(decision.emit);
    };
    setImmediate(settleQuiet);
  }

  #emit<T extends SinkEventType>(type: T, facts: Record<string, unknown>): void {
    if (!this.#config.events[type] || !this.#sessionId) return;
    this.queue.push(buildSinkEnvelope(type, this.#sessionId, buildSinkPayload(type, facts), new Date()));
  }

  #emitTerminal(ended: Round): void {
    const u = this.#unit;
    this.#unit = null;
    if (!u) return;
    // The round's own facts (the answer, the error) go as they are: the event's schema keeps its own keys.
    const { kind, duration_ms, ...facts } = ended;
    this.#emit(`run.${kind}`, { ...u, ...facts, duration_seconds: duration_ms === undefined ? undefined : duration_ms / 1000 });
  }

  #toolDone(id: string, tool: string, ok: boolean, now: number): void {
    const call = this.#tools.get(id);
    this.#tools.delete(id);
    this.#emit("tool.completed", {
      run_id: this.#unit?.run_id,
      tool_call_id: id,
      tool,
      ok,
      duration_seconds: call ? (now - call.startedAt) / 1000 : undefined,
    });
  }

  #finishTools(now: number): void {
    // A call that never reported its end (aborted before finishing) still closes on the app.
    for (const [id, call] of this.#tools) this.#toolDone(id, call.tool, false, now);
  }
}

/** A stale context (the session was replaced) counts as idle: nothing more can start on it. */
function idle(ctx: ExtensionContext): boolean {
  try {
    return ctx.isIdle();
  } catch {
    return true;
  }
}

function readTokenQuietly(tokenFile: string): string | undefined {
  try {
    return readSinkToken(tokenFile);
  } catch {
    return undefined;
  }
}
