/**
 * The control lane (command protocol 3): one long poll for control commands kept open while the
 * session is switched on, idle and busy alike, so a stop or an approval decision reaches a run in
 * the middle of a tool. Each command goes to the handler registered for its kind (the dispatcher),
 * its outcome is journaled (flushed) and then ACKed; a command already journaled is only ACKed
 * again with its journaled outcome. Nothing here runs inside a Pi handler.
 */
import { AckAnswer, ClaimAnswer, OUTCOMES, type ClaimedCommand, type CommandOutcome, type ControlKind } from "../../protocol/queue.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { errorText } from "../../common/errors.ts";
import type { ApiClient } from "../delivery/http-client.ts";
import { asDeliveryError, needsNoWarning, realSleep, retryDelayMs, runWithRetry } from "../delivery/retry.ts";
import type { Messages } from "../messages.ts";
import type { CommandJournal } from "./journal.ts";

export interface ControlCommand {
  commandId: string;
  kind: string;
  payload: Record<string, unknown>;
}

/** Applies one control command and says what happened; never throws on purpose (a throw is `unknown`). */
export type ControlHandler = (command: ControlCommand) => CommandOutcome | Promise<CommandOutcome>;

/** Handlers by kind, so a feature registers its own kind without editing the lane. */
export class ControlDispatcher {
  readonly #handlers = new Map<string, ControlHandler>();

  /** Registers the handler of `kind`; returns the unregister. A later registration replaces an earlier one. */
  on(kind: ControlKind, handler: ControlHandler): () => void {
    this.#handlers.set(kind, handler);
    return () => {
      if (this.#handlers.get(kind) === handler) this.#handlers.delete(kind);
    };
  }

  /** The handler's outcome if it is one its kind allows; `unknown` for a kind nobody handles or a failed handler. */
  /** `failed` hears why a handler threw, to be worded for the person by the caller. */
  async dispatch(command: ControlCommand, failed: (why: string) => void): Promise<CommandOutcome> {
    const handler = this.#handlers.get(command.kind);
    if (!handler) return "unknown";
    try {
      const outcome = await handler(command);
      return allowedOutcome(command.kind, outcome);
    } catch (error) {
      failed(errorText(error));
      return "unknown";
    }
  }
}

/** An outcome the server accepts for this kind; anything else becomes `unknown`. */
export function allowedOutcome(kind: string, outcome: CommandOutcome): CommandOutcome {
  const allowed = (OUTCOMES as Readonly<Record<string, readonly CommandOutcome[]>>)[kind];
  return allowed?.includes(outcome) ? outcome : "unknown";
}

/** Beyond `wait_ms`, how long the client waits for the server to answer a held claim. */
const CLAIM_MARGIN_MS = 5_000;
const ACK_TIMEOUT_MS = 10_000;
const ACK_ATTEMPTS = 3;
const RETRY_BASE_MS = 500;

export interface ControlLaneSession {
  client: ApiClient;
  sessionId: () => string | undefined;
  runtimeId: string;
  journal: CommandJournal;
  /** The long poll's hold; 0 polls every `idlePollIntervalMs` instead. */
  longPollMs: number;
  idlePollIntervalMs: number;
  /** Retries after failures are capped here: a server that comes back is reached within one heartbeat. */
  heartbeatIntervalMs: number;
  /** Asks presence for a heartbeat (the server lost this runtime). */
  beat: () => void;
  report: (message: string) => void;
  /** The texts in the bound session's language. */
  text: () => Messages;
}

export interface ControlLane {
  /** Starts the poll loop if it is not running. */
  start(session: ControlLaneSession): void;
  /** Ends the poll loop; an ACK in flight finishes on its own. */
  stop(): void;
  readonly running: boolean;
}

export function createControlLane(dispatcher: ControlDispatcher): ControlLane {
  let current: AbortController | undefined;

  async function loop(session: ControlLaneSession, stopped: AbortSignal) {
    let failures = 0;
    let lastFailure: string | undefined;
    while (!stopped.aborted) {
      const sessionId = session.sessionId();
      if (!sessionId) return;
      const waitMs = Math.min(session.longPollMs, LIMITS.longPollMaxMs);
      try {
        const answer = await session.client.request("GET", "commands", {
          query: { session_id: sessionId, runtime_id: session.runtimeId, lane: "control", wait_ms: waitMs },
          timeoutMs: waitMs + CLAIM_MARGIN_MS,
          schema: ClaimAnswer,
          signal: stopped,
        });
        failures = 0;
        lastFailure = undefined;
        if (answer.command) await apply(session, sessionId, answer.command, answer.lease.token);
        else if (waitMs === 0) await realSleep(session.idlePollIntervalMs, stopped);
      } catch (thrown) {
        if (stopped.aborted) return;
        failures++;
        const error = asDeliveryError(thrown);
        if (error.code === "session_offline") session.beat();
        const message = session.text().commands.controlClaimFailed(error.message);
        // A refused token is told once by the client, for every channel at once.
        if (message !== lastFailure && !needsNoWarning(error)) session.report(message);
        lastFailure = message;
        await realSleep(Math.min(retryDelayMs(error, failures, RETRY_BASE_MS, Math.random), session.heartbeatIntervalMs), stopped).catch(() => undefined);
      }
    }
  }

  async function apply(session: ControlLaneSession, sessionId: string, command: ClaimedCommand, leaseToken: string) {
    const { command_id, event_id } = command;
    let outcome = session.journal.outcome(command_id);
    if (!session.journal.has(command_id) || outcome === undefined) {
      outcome = await dispatcher.dispatch({ commandId: command_id, kind: command.kind, payload: command.payload ?? {} }, (why) =>
        session.report(session.text().commands.controlFailed(command.kind, why)),
      );
      try {
        await session.journal.record({ command_id, event_id, session_id: sessionId, delivered_at: new Date().toISOString(), outcome });
      } catch (error) {
        // Applied but not journaled: no ACK, so the lease runs out and the redelivery is applied
        // again, which for a stop is harmless (the run it would stop has ended: already idle).
        session.report(session.text().commands.journalWriteFailed(session.journal.file, errorText(error)));
        return;
      }
    }
    const acked = await runWithRetry(
      () =>
        session.client.request("POST", `commands/${encodeURIComponent(command_id)}/ack`, {
          body: { session_id: sessionId, runtime_id: session.runtimeId, lease_token: leaseToken, outcome },
          timeoutMs: ACK_TIMEOUT_MS,
          schema: AckAnswer,
        }),
      { maxAttempts: ACK_ATTEMPTS, backoffMs: RETRY_BASE_MS, sleep: realSleep, random: Math.random },
    );
    if (!acked.ok && !needsNoWarning(acked.error)) session.report(session.text().commands.controlAckFailed(acked.error.message));
  }

  return {
    start(session) {
      if (current) return;
      const controller = new AbortController();
      current = controller;
      void loop(session, controller.signal).finally(() => {
        if (current === controller) current = undefined;
      });
    },
    stop() {
      current?.abort();
      current = undefined;
    },
    get running() {
      return current !== undefined;
    },
  };
}
