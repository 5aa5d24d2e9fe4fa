/** The control channel (protocol 3): one long poll kept open idle and busy, so a stop or an approval
 * decision reaches a run mid-tool; each outcome is journaled before the ACK, and a journaled one is only re-ACKed. */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { ReportOnce } from "../../common/report-once.ts";
import { CONTROL_PROTOCOL, type ClaimedCommand, type CommandOutcome, type ControlKind, type StoppedRun } from "../../protocol/queue.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { realSleep } from "../server-client/retry.ts";
import { isIdle, type LaneConnection } from "./lane.ts";
import type { ServerHeard } from "../server-client/server-facts.ts";
import { allowedOutcome, controlStep, type Applied } from "./control-rules.ts";

export type ControlCommand = { commandId: string; kind: string; payload: Record<string, unknown> };

/** Applies one control command and says what happened; never throws on purpose (a throw is `unknown`). */
export type ControlHandler = (command: ControlCommand) => CommandOutcome | Promise<CommandOutcome>;

/** Where a feature registers the handler of its control kind (so it need not edit the channel); returns the unregister. */
export type ControlRegistry = { on(kind: ControlKind, handler: ControlHandler): () => void };

export class ControlDispatcher implements ControlRegistry {
  readonly #handlers = new Map<string, ControlHandler>();

  /** A later registration replaces an earlier one. */
  on(kind: ControlKind, handler: ControlHandler): () => void {
    this.#handlers.set(kind, handler);
    return () => {
      if (this.#handlers.get(kind) === handler) this.#handlers.delete(kind);
    };
  }

  /** The handler's outcome if its kind allows it, else `unknown` (no handler, or it threw: `failed` hears why, for the caller to word). */
  async dispatch(command: ControlCommand, failed: (why: string) => void): Promise<CommandOutcome> {
    const handler = this.#handlers.get(command.kind);
    if (!handler) return "unknown";
    try {
      return allowedOutcome(command.kind, await handler(command));
    } catch (error) {
      failed(errorText(error));
      return "unknown";
    }
  }
}

export class ControlChannel extends ControlDispatcher {
  readonly #server: ServerHeard;
  readonly #runNow: () => StoppedRun | undefined;
  #ctx: ExtensionContext | undefined;
  #lane: LaneConnection | undefined;
  #poll: AbortController | undefined;

  /** `runNow`: the run in progress as a stop's ACK names it (read before the abort ends it). */
  constructor(server: ServerHeard, runNow: () => StoppedRun | undefined) {
    super();
    this.#server = server;
    this.#runNow = runNow;
    // The protocol the server speaks comes with each accepted heartbeat.
    server.onAccepted(() => this.#sync());
  }

  /** Polls for the session of `ctx` once `lane` is ready and the server speaks protocol 3. */
  start(ctx: ExtensionContext, lane: LaneConnection): void {
    this.#ctx = ctx;
    if (this.#lane === lane) return;
    this.#lane = lane;
    void lane.ready.then((ready) => {
      if (ready && this.#lane === lane) this.#sync();
    });
  }

  /** Ends the poll; an ACK in flight finishes on its own. */
  stop(): void {
    this.#lane = undefined;
    this.#poll?.abort();
    this.#poll = undefined;
  }

  /** Exactly what Esc does (streaming, a running tool's process, a retry wait); says which run it stopped, as the server may know nothing else of it. */
  #stopRun(): Applied {
    const ctx = this.#ctx;
    if (!ctx || isIdle(ctx)) return { outcome: "already_idle" };
    const run = this.#runNow();
    ctx.abort();
    return { outcome: "stopped", ...(run ? { run } : {}) };
  }

  #sync(): void {
    const lane = this.#lane;
    if (!lane?.journal || this.#poll || this.#server.commandProtocol() < CONTROL_PROTOCOL) return;
    const controller = new AbortController();
    this.#poll = controller;
    void this.#loop(lane, controller.signal).finally(() => {
      if (this.#poll === controller) this.#poll = undefined;
    });
  }

  async #loop(lane: LaneConnection, stopped: AbortSignal): Promise<void> {
    let failures = 0;
    const claimFailures = new ReportOnce((message) => lane.reports.report(message));
    while (!stopped.aborted) {
      const sessionId = this.#ctx?.sessionManager.getSessionId();
      if (!sessionId) return;
      const waitMs = Math.min(lane.settings.longPollMs, LIMITS.longPollMaxMs);
      try {
        const answer = await lane.claim(sessionId, waitMs, { lane: "control" }, stopped);
        failures = 0;
        claimFailures.clear();
        if (answer.command) await this.#apply(lane, sessionId, answer.command, answer.lease.token);
        else if (waitMs === 0) await realSleep(lane.settings.idlePollIntervalMs, stopped);
      } catch (thrown) {
        if (stopped.aborted) return;
        failures++;
        await realSleep(lane.claimFailed(thrown, failures, claimFailures, lane.text.commands.controlClaimFailed), stopped).catch(() => undefined);
      }
    }
  }

  async #apply(lane: LaneConnection, sessionId: string, command: ClaimedCommand, token: string): Promise<void> {
    const journal = lane.journal;
    if (!journal) return;
    const step = controlStep({ has: journal.has(command.command_id), ...journal.applied(command.command_id) });
    // The built-in stop is applied here; every other kind by the feature that registered it. Applied but not journaled: no ACK, so the redelivery is
    // applied again, which for a stop is harmless (the run it would stop has ended: already idle).
    const control = { commandId: command.command_id, kind: command.kind, payload: command.payload ?? {} };
    const failed = (why: string) => lane.reports.report(lane.text.commands.controlFailed(command.kind, why));
    const applied: Applied = !step.apply ? step : command.kind === "stop" ? this.#stopRun() : { outcome: await this.dispatch(control, failed) };
    await lane.confirm(command, { sessionId, token, journaled: !step.apply }, lane.text.commands.controlAckFailed, applied);
  }
}
