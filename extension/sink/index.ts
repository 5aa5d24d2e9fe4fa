/**
 * The local desktop sink (docs/local-sink.md): a second, one-way channel that tells a desktop app
 * on this machine what state a run is in. It observes the shared run recorder, only when
 * `sink.enabled`; it does not depend on `/anon-notify` activation (the app shows every main-agent
 * session). Handlers only record facts and push onto the queue; one worker posts to the socket.
 */
import { randomUUID } from "node:crypto";
import { debuglog } from "node:util";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { isSubagent } from "../../activation.ts";
import type { Config } from "../config/schema.ts";
import type { RunOutcome } from "../../lifecycle.ts";
import { runRecorderFor, type RecordedRun } from "../run-recorder.ts";
import { modelLabel, projectName } from "../session-labels.ts";
import type { SinkEnvelope, SinkEventType } from "../../protocol/sink.ts";
import { createSinkClient } from "./client.ts";
import { onRoundSettled, onSettleQuiet, type CompletedRound, type Round, type RoundEnd } from "./hold.ts";
import { buildSinkEnvelope, buildSinkPayload, formatSinkError } from "./payload.ts";
import { createSinkQueue, type SinkQueue } from "./queue.ts";
import { ensureSinkToken, readSinkToken } from "./token.ts";
import { errorText } from "../../common/errors.ts";
import { localeLanguage, messagesFor, type Messages } from "../messages.ts";

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
  /** Where the one debug line goes; by default Node's `NODE_DEBUG=anon-notify-sink`. */
  debug?: (line: string) => void;
  /** The texts for `warn`; by default in the locale's language. */
  text?: Messages;
}

export interface InstalledSink {
  readonly queue: SinkQueue<SinkEnvelope>;
  /** Resolves once a just-settled run's completion has been decided and everything queued was sent. */
  flush(): Promise<void>;
  /** Releases a held completion, drains briefly, and frees the socket (also done at session_shutdown). */
  close(): Promise<void>;
}

const installed = new WeakMap<ExtensionAPI, InstalledSink>();

/** Without the caller's verdict: the chat channel's subagent rule with its defaults. */
function subagentByDefault(ctx: ExtensionContext): boolean {
  return isSubagent({ mode: ctx.mode, sessionFile: ctx.sessionManager.getSessionFile(), optOutFlag: false, env: process.env }, true);
}

/**
 * The sink's own reading of a settled run: the chat channel's classifier decides, but a user
 * interrupt is reported here (the app must stop showing "working"), and so is a run that ended
 * without any reply.
 */
export function roundEndOf(outcome: RunOutcome, answer: { text: string; at: number | undefined } | undefined): RoundEnd {
  switch (outcome.kind) {
    case "completed":
      return answer
        ? { kind: "completed", had_response: true, answer: answer.text, answered_at: isoTime(answer.at) }
        : { kind: "completed", had_response: false };
    case "silent":
      return { kind: "failed", error: formatSinkError("RunError", "the run ended without a reply") };
    case "interrupted":
      return { kind: "cancelled" };
    case "failed":
      return { kind: "failed", error: failureText(outcome) };
  }
}

function failureText(outcome: Extract<RunOutcome, { kind: "failed" }>): string {
  switch (outcome.reason) {
    case "error":
      return formatSinkError("ModelError", outcome.errorMessage ?? undefined);
    case "length":
      return formatSinkError("LengthError", "the reply was cut off at the output token limit");
    case "incomplete_tool_batch":
    case "tool_error_in_final_batch":
    case "non_terminating_tool_batch":
      return formatSinkError("ToolError", `the run ended after its tool calls without a reply (${outcome.reason})`);
    case "unexpected_stop_reason":
      return formatSinkError("RunError", `unexpected stop reason ${outcome.stopReason}`);
  }
}

interface Unit {
  runId: string;
  project: string;
  model: string | undefined;
}

/**
 * Subscribes the sink to Pi when `config.enabled`; otherwise installs nothing at all and returns
 * undefined. Call it from the extension factory or from `session_start`; it closes itself at
 * `session_shutdown`. A token file problem is the user's to fix: it is reported once through
 * `warn` and the sink stays off; an absent, slow or refusing app is not reported (one debug line).
 */
export function installSink(pi: ExtensionAPI, config: SinkConfig, options: SinkOptions = {}): InstalledSink | undefined {
  // One sink per Pi binding, even if session_start comes twice without a shutdown in between
  // (Pi 0.87.1's RPC new_session does that): the older one stops listening at once.
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

  const subagent = options.isSubagent ?? subagentByDefault;
  const debug = options.debug ?? debuglog("anon-notify-sink");
  const client = createSinkClient(config.socket);
  let failureLogged = false;
  const queue = createSinkQueue<SinkEnvelope>(async (envelope) => {
    let result = await client.post(envelope, token);
    if (result.status === 401) {
      // The app may have created the shared file after we read it; read it again, never rewrite it.
      const fresh = readTokenQuietly(config.tokenFile);
      if (fresh && fresh !== token) {
        token = fresh;
        result = await client.post(envelope, token);
      }
    }
    if (!result.ok && !failureLogged) {
      failureLogged = true;
      debug(`desktop sink ${config.socket}: ${result.reason}; events are dropped while it fails (logged once)`);
    }
  });

  let sessionId = "";
  let unit: Unit | null = null;
  /** The recorder's current run, while this sink follows it. */
  let round: RecordedRun | null = null;
  const tools = new Map<string, { tool: string; startedAt: number }>();
  let held: CompletedRound | null = null;
  let pendingPrompt: string | undefined;
  let suppressed: boolean | undefined;
  let closed = false;

  const emit = <T extends SinkEventType>(type: T, facts: Record<string, unknown>): void => {
    if (!config.events[type] || !sessionId) return;
    queue.push(buildSinkEnvelope(type, sessionId, buildSinkPayload(type, facts), new Date()));
  };
  const unitFacts = (u: Unit) => ({ run_id: u.runId, project: u.project, model: u.model });
  const emitTerminal = (ended: Round): void => {
    const u = unit;
    unit = null;
    if (!u) return;
    const common = {
      ...unitFacts(u),
      agent_name: ended.agent_name,
      duration_seconds: ended.duration_ms === undefined ? undefined : ended.duration_ms / 1000,
    };
    if (ended.kind === "completed") {
      emit("run.completed", { ...common, had_response: ended.had_response, answer: ended.answer, answered_at: ended.answered_at });
    } else if (ended.kind === "failed") {
      emit("run.failed", { ...common, error: ended.error });
    } else {
      emit("run.cancelled", common);
    }
  };
  const finishTools = (now: number): void => {
    // A call that never reported its end (aborted before finishing) still closes on the app.
    for (const [id, call] of tools) {
      emit("tool.completed", { run_id: unit?.runId, tool_call_id: id, tool: call.tool, ok: false, duration_seconds: (now - call.startedAt) / 1000 });
    }
    tools.clear();
  };

  // The sink reports how each run ended, so it always needs the exact outcome.
  const observation = runRecorderFor(pi).observe(
    {
      start(run, ctx) {
        if (closed) return;
        suppressed ??= subagent(ctx);
        // A subagent's runs never reach the app: stop observing, which costs its turns nothing.
        if (suppressed) return observation.close();
        sessionId ||= ctx.sessionManager.getSessionId();
        round = run;
        if (unit) return;
        unit = { runId: randomUUID(), project: projectName(ctx.cwd), model: modelLabel(ctx.model) ?? undefined };
        emit("run.started", { ...unitFacts(unit), agent_name: ctx.sessionManager.getSessionName(), prompt: pendingPrompt });
        pendingPrompt = undefined;
      },
      toolStart(run, event) {
        if (run !== round || !unit) return;
        tools.set(event.toolCallId, { tool: event.toolName, startedAt: Date.now() });
        emit("tool.started", { run_id: unit.runId, tool_call_id: event.toolCallId, tool: event.toolName });
      },
      toolEnd(run, event, ctx) {
        if (run !== round || !unit) return;
        const call = tools.get(event.toolCallId);
        tools.delete(event.toolCallId);
        emit("tool.completed", {
          run_id: unit.runId,
          tool_call_id: event.toolCallId,
          tool: event.toolName,
          ok: !event.isError && !ctx.signal?.aborted,
          duration_seconds: call ? (Date.now() - call.startedAt) / 1000 : undefined,
        });
      },
      settled(settled, ctx) {
        if (closed || suppressed) return;
        const r = round;
        round = null;
        if (r && settled?.run === r) {
          const now = Date.now();
          finishTools(now);
          const ended: Round = {
            ...roundEndOf(settled.outcome, r.answer),
            duration_ms: now - r.facts.startedAt,
            agent_name: ctx.sessionManager.getSessionName(),
          };
          const decision = onRoundSettled(held, ended);
          held = decision.held;
          if (decision.emit) emitTerminal(decision.emit);
        }
        if (!held) return;
        // Work requested from a settled handler (a goal-like loop, queued input) starts right after
        // all settled handlers return; only then is it known whether this settle was the last one.
        const settleQuiet = () => {
          if (closed) return;
          // Busy but no run yet (a run still starting, a compaction): look again, never hold blindly.
          if (round === null && !idle(ctx)) return void setTimeout(settleQuiet, SETTLE_RECHECK_MS).unref();
          const decision = onSettleQuiet(held, round !== null);
          held = decision.held;
          if (decision.emit) emitTerminal(decision.emit);
        };
        setImmediate(settleQuiet);
      },
    },
    { exact: true },
  );

  const offs = [
    pi.on("before_agent_start", (event) => {
      pendingPrompt = event.prompt;
    }),
    pi.on("session_shutdown", async () => {
      await close();
    }),
  ];

  async function close(): Promise<void> {
    if (closed) return;
    const now = Date.now();
    // Quitting mid-run cancels it; a held completion is released: neither may stay on "working".
    const ended = round ? onRoundSettled(held, { kind: "cancelled", duration_ms: now - round.facts.startedAt }).emit : held;
    if (round) finishTools(now);
    if (ended) emitTerminal(ended);
    round = null;
    held = null;
    closed = true;
    observation.close();
    for (const off of offs) off();
    await queue.close(SINK_SHUTDOWN_DRAIN_MS);
    await client.destroy();
  }

  async function flush(): Promise<void> {
    // The release check runs on the turn after agent_settled; wait for it, then for the worker.
    await new Promise((resolve) => setImmediate(resolve));
    await queue.idle();
  }

  const sink = { queue, flush, close };
  installed.set(pi, sink);
  return sink;
}

function isoTime(ms: number | undefined): string | undefined {
  return ms === undefined ? undefined : new Date(ms).toISOString();
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
