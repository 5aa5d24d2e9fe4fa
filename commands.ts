/**
 * The command channel: instructions queued on the server for this session reach it as visible
 * steer messages. Idle, the runtime holds one claim request open (long poll), so an instruction
 * arrives within milliseconds and an idle session costs one request per `longPollMs`; when a run
 * starts, a protocol-3 server answers the held request (the run's heartbeat ends it) and whatever
 * it carries is read, while an older server's is abandoned. Busy, it claims one command at the end
 * of each tool turn and hands it to Pi only at a safe point (a turn end, or once settled). Each
 * command reaches the session once: its id is journaled and flushed before the ACK, and a command
 * whose id is already journaled, or already in the session, is ACKed without being delivered again.
 *
 * An instruction the session took in but never answered because the user interrupted the run is
 * reported: a TUI warning for the user and a `warning` notice for the persona. One still queued
 * when the interrupt dropped Pi's queue (TUI Esc) is written into the session without starting a
 * run, then reported the same way, so it is neither lost nor run against the user's interrupt.
 *
 * With a protocol-3 server the control lane (extension/commands/control-lane.ts) runs beside it,
 * busy or idle: `stop` aborts the run in progress exactly like Esc, and other kinds go to the
 * handler registered with `onControlCommand`.
 */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { AckAnswer, ClaimAnswer, CONTROL_PROTOCOL, type ClaimedCommand, type CommandOutcome, type ControlKind } from "./protocol/queue.ts";
import { ControlDispatcher, createControlLane, type ControlHandler } from "./extension/commands/control-lane.ts";
import { COMMAND_MESSAGE_TYPE, CommandDetails, commandMessage, commandMessageRenderer } from "./extension/commands/message.ts";
import { openCommandJournal, type CommandJournal } from "./extension/commands/journal.ts";
import { errorText } from "./common/errors.ts";
import type { ApiClient } from "./extension/delivery/http-client.ts";
import type { Connection, Presence, PresenceDeps } from "./extension/presence/presence.ts";
import type { ServerHeard } from "./extension/server-facts.ts";
import { modelSupportsImages } from "./extension/session-labels.ts";
import { asDeliveryError, needsNoWarning, realSleep, retryDelayMs, runWithRetry } from "./extension/delivery/retry.ts";
import { attachable } from "./extension/pi-handlers.ts";
import { SEND_CHANNEL } from "./extension/state-bus.ts";
import {
  interruptedNotice,
  planClaim,
  planDelivery,
  repollDelay,
  unansweredAfterInterrupt,
  wantsTurnEnd,
  type ClaimKind,
  type RunFact,
} from "./extension/commands/decisions.ts";

/** Beyond `wait_ms`, how long the client waits for the server to answer a held claim. */
export const CLAIM_MARGIN_MS = 5_000;
export const BOUNDARY_CLAIM_TIMEOUT_MS = 10_000;
export const ACK_TIMEOUT_MS = 10_000;
export const ACK_ATTEMPTS = 3;
export const RETRY_BASE_MS = 500;
/** How long stopping (deactivation, reload, quit) waits for ACKs already in flight. */
export const STOP_GRACE_MS = 2_000;

// ── Edge ────────────────────────────────────────────────────────────────────

interface Lease {
  command: ClaimedCommand;
  token: string;
}

/** The same session edge as presence, plus what the server said (its accepted heartbeat gates claiming) and presence's beat. */
export interface CommandChannelDeps extends Omit<PresenceDeps, "server"> {
  presence: Pick<Presence, "beat">;
  server: ServerHeard;
}

export interface CommandChannel {
  /** Starts claiming for the session of `ctx` once presence has been accepted. Idempotent. */
  start(ctx: ExtensionContext): void;
  /** Stops claiming and waits for ACKs in flight. Commands already handed to Pi are still confirmed. */
  stop(): Promise<void>;
  /** Claimed but not yet in the session: held for a boundary, or handed to Pi's queue. */
  pending(): { held: string | null; queued: string[] };
  /** Registers the handler of a control kind (protocol 3); returns the unregister. `stop` is built in. */
  onControlCommand(kind: ControlKind, handler: ControlHandler): () => void;
}

/** Registers the renderer and the Pi handlers; call once from the extension factory. */
export function installCommandChannel(pi: ExtensionAPI, deps: CommandChannelDeps): CommandChannel {
  const now = deps.now ?? Date.now;
  let client: ApiClient | undefined;
  let settings: Connection["config"]["command"] | undefined;
  let heartbeatIntervalMs = 0;
  let ctx: ExtensionContext | undefined;
  let journal: CommandJournal | undefined;
  let running = false;
  let generation = 0;
  let claim: { controller: AbortController; heldOpen: boolean } | undefined;
  let held: Lease | undefined;
  // The turn in progress ended in tool calls, so the run goes on after them.
  let toolTurn = false;
  const sent = new Map<string, Lease>();
  const confirming = new Set<Promise<void>>();
  let failures = 0;
  let wakeTimer: ReturnType<typeof setTimeout> | undefined;
  let lastFailure: string | undefined;
  let run: { facts: RunFact[]; aborted: boolean; instructions: Map<string, Lease> } = newRun();
  const dispatcher = new ControlDispatcher();
  const controlLane = createControlLane(dispatcher);
  const speaksControl = () => deps.server.commandProtocol() >= CONTROL_PROTOCOL;

  function newRun() {
    return { facts: [] as RunFact[], aborted: false, instructions: new Map<string, Lease>() };
  }

  const isIdle = () => {
    try {
      return ctx?.isIdle() ?? false;
    } catch {
      return false;
    }
  };
  const sessionId = () => ctx?.sessionManager.getSessionId();
  const supportsImages = () => {
    try {
      return modelSupportsImages(ctx?.model);
    } catch {
      return false;
    }
  };
  const journaled = (commandId: string) => journal?.has(commandId) ?? false;

  const reportOnce = (message: string) => {
    if (message !== lastFailure) deps.report(message);
    lastFailure = message;
  };

  /** The branch marker: the session itself holds the delivered message with this command id. */
  const inSession = (commandId: string) => {
    try {
      return (ctx?.sessionManager.getEntries() ?? []).some(
        (entry) =>
          entry.type === "custom_message" &&
          entry.customType === COMMAND_MESSAGE_TYPE &&
          CommandDetails.safeParse(entry.details).data?.command_id === commandId,
      );
    } catch {
      return false;
    }
  };

  const wakeAfter = (delayMs: number) => {
    clearTimeout(wakeTimer);
    wakeTimer = setTimeout(() => {
      wakeTimer = undefined;
      evaluate(false);
    }, delayMs);
    wakeTimer.unref();
  };

  /** Exactly what Esc does: aborts streaming, a running tool (its process is killed) and a retry wait. */
  function stopRun(): CommandOutcome {
    if (!ctx || isIdle()) return "already_idle";
    ctx.abort();
    return "stopped";
  }
  dispatcher.on("stop", stopRun);

  /** Starts the control lane once the server has said it speaks protocol 3 (also after an upgrade). */
  function syncControlLane() {
    if (!running || controlLane.running || !client || !journal || !settings || !speaksControl()) return;
    controlLane.start({
      client,
      sessionId,
      runtimeId: deps.runtimeId,
      journal,
      longPollMs: settings.longPollMs,
      idlePollIntervalMs: settings.idlePollIntervalMs,
      heartbeatIntervalMs,
      beat: () => deps.presence.beat(),
      report: reportOnce,
      text: deps.text,
    });
  }

  function evaluate(atBoundary: boolean) {
    syncControlLane();
    if (held) {
      const lease = held;
      const plan = planDelivery({ alreadyDelivered: false, idle: isIdle(), atBoundary });
      if (plan === "deliver") {
        held = undefined;
        syncBoundary();
        deliver(lease);
      }
    }
    const plan = planClaim(
      {
        running,
        idle: isIdle(),
        serverHeardIdle: deps.server.heardIdle(),
        atBoundary,
        claimInFlight: claim !== undefined,
        // Until its ACK is answered the server still holds our lease on the queue's head and would
        // answer a new claim with nothing (an ACK does not wake a held claim), so none is made.
        outstanding: held !== undefined || sent.size > 0 || confirming.size > 0,
        backingOff: wakeTimer !== undefined,
      },
      settings?.longPollMs ?? 0,
    );
    if (plan.claim) void claimOnce(plan.kind, plan.waitMs);
  }

  async function claimOnce(kind: ClaimKind, waitMs: number) {
    const id = sessionId();
    if (!id || !client || !settings) return;
    const controller = new AbortController();
    const current = { controller, heldOpen: waitMs > 0 };
    claim = current;
    // Only this claim's own outcome may clear the slot: a stop and restart may have started another.
    const release = () => {
      if (claim === current) claim = undefined;
    };
    const startedAt = now();
    const mine = generation;
    try {
      const answer = await client.request("GET", "commands", {
        query: {
          session_id: id,
          runtime_id: deps.runtimeId,
          capabilities: supportsImages() ? "images" : undefined,
          wait_ms: waitMs,
        },
        timeoutMs: waitMs > 0 ? waitMs + CLAIM_MARGIN_MS : BOUNDARY_CLAIM_TIMEOUT_MS,
        schema: ClaimAnswer,
        signal: controller.signal,
      });
      release();
      failures = 0;
      lastFailure = undefined;
      if (answer.command) {
        claimed({ command: answer.command, token: answer.lease.token });
      } else if (running && mine === generation && isIdle()) {
        const delay = repollDelay(kind, now() - startedAt, settings.idlePollIntervalMs);
        if (delay > 0) return wakeAfter(delay);
      }
    } catch (thrown) {
      release();
      if (controller.signal.aborted || mine !== generation) return;
      failures++;
      const error = asDeliveryError(thrown);
      // The server lost this runtime (restart, TTL): a heartbeat now re-registers it before the retry.
      if (error.code === "session_offline") deps.presence.beat();
      // A refused token is told once by the client, for every channel at once.
      if (!needsNoWarning(error)) reportOnce(deps.text().commands.claimFailed(error.message));
      // Capped at the heartbeat interval: a server that comes back is claimed from within one heartbeat.
      return wakeAfter(Math.min(retryDelayMs(error, failures, RETRY_BASE_MS, Math.random), heartbeatIntervalMs));
    }
    evaluate(false);
  }

  function syncBoundary() {
    boundary.set(wantsTurnEnd({ running, held: held !== undefined, toolTurn }));
  }

  function claimed(lease: Lease) {
    const { command_id } = lease.command;
    const plan = planDelivery({
      alreadyDelivered: journaled(command_id) || inSession(command_id) || sent.has(command_id),
      idle: isIdle(),
      atBoundary: false,
    });
    if (plan === "ack-only") {
      // Pi already took this one in (a lease retry, a reload, a restart): confirm, never deliver twice.
      if (!sent.has(command_id)) confirm(lease);
    } else if (plan === "deliver") deliver(lease);
    else {
      held = lease;
      syncBoundary();
    }
  }

  function deliver(lease: Lease) {
    const id = sessionId();
    if (!id) return;
    sent.set(lease.command.command_id, lease);
    try {
      pi.sendMessage(commandMessage(lease.command, id), { deliverAs: "steer", triggerTurn: true });
    } catch (error) {
      sent.delete(lease.command.command_id);
      reportOnce(deps.text().commands.handOverFailed(errorText(error)));
    }
  }

  /** Journal (flushed) first, then ACK: a lost ACK is redelivered and then only ACKed. */
  function confirm(lease: Lease) {
    const id = sessionId() ?? "unknown";
    const task = (async () => {
      const { command_id, event_id } = lease.command;
      try {
        if (!journal) throw new Error("journal not open");
        if (!journal.has(command_id)) {
          await journal.record({ command_id, event_id, session_id: id, delivered_at: new Date(now()).toISOString() });
        }
      } catch (error) {
        // Without the journal line the ACK waits: the lease expires, and the redelivery finds the
        // command in the session and tries again.
        reportOnce(deps.text().commands.journalWriteFailed(settings?.journal ?? "", errorText(error)));
        return;
      }
      const acked = await runWithRetry(
        () => {
          if (!client) throw new Error("no connection");
          return client.request("POST", `commands/${encodeURIComponent(command_id)}/ack`, {
            body: { session_id: id, runtime_id: deps.runtimeId, lease_token: lease.token },
            timeoutMs: ACK_TIMEOUT_MS,
            schema: AckAnswer,
          });
        },
        { maxAttempts: ACK_ATTEMPTS, backoffMs: RETRY_BASE_MS, sleep: realSleep, random: Math.random },
      );
      if (!acked.ok && !needsNoWarning(acked.error)) reportOnce(deps.text().commands.ackFailed(acked.error.message));
    })();
    confirming.add(task);
    void task.finally(() => {
      confirming.delete(task);
      evaluate(false);
    });
  }

  pi.registerMessageRenderer(COMMAND_MESSAGE_TYPE, commandMessageRenderer(deps.text));
  // An idle long poll waits until the server heard idle (planClaim): an accepted heartbeat may be that moment.
  deps.server.onAccepted(() => {
    if (running && journal) evaluate(false);
  });

  // Attached only when a turn end is of use (wantsTurnEnd): a turn_end listener makes Pi build a
  // context preview at every turn. Without it, agent_end and the aborted stop reason still mark an
  // interrupted run.
  const boundary = attachable(() => [
    pi.on("turn_end", (_event, c) => {
      ctx = c;
      // An interrupted run is no place for a new instruction; it waits for the settle.
      if (c.signal?.aborted) {
        run.aborted = true;
        return;
      }
      evaluate(true);
    }),
  ]);
  // Attached while the channel runs, and after a stop until what was handed to Pi is confirmed: a
  // session that is not switched on runs none of these per turn.
  const lifecycle = attachable(() => [
    pi.on("agent_start", (_event, c) => {
      ctx = c;
      // A busy session claims only at turn ends. A protocol-3 server ends the held idle claim itself
      // on the run's heartbeat, and a command it leased in that instant is read and held for the first
      // turn end; an older server's is abandoned (a lease granted in that instant then expires).
      if (claim?.heldOpen && !speaksControl()) claim.controller.abort();
    }),
    pi.on("message_end", (event, c) => {
      ctx = c;
      const message = event.message;
      if (message.role === "assistant") {
        run.facts.push({ kind: "assistant", stopReason: message.stopReason });
        if (message.stopReason === "aborted") run.aborted = true;
        toolTurn = message.stopReason === "toolUse";
        syncBoundary();
        return;
      }
      if (message.role !== "custom" || message.customType !== COMMAND_MESSAGE_TYPE) return;
      const details = CommandDetails.safeParse(message.details);
      if (!details.success) return;
      const lease = sent.get(details.data.command_id);
      if (!lease) return;
      sent.delete(details.data.command_id);
      run.facts.push({ kind: "command", commandId: details.data.command_id });
      run.instructions.set(details.data.command_id, lease);
      confirm(lease);
    }),
    pi.on("agent_end", (_event, c) => {
      if (c.signal?.aborted) run.aborted = true;
    }),
    pi.on("agent_settled", (_event, c) => {
      ctx = c;
      toolTurn = false;
      syncBoundary();
      settleRun();
      evaluate(false);
      syncLifecycle();
    }),
    pi.on("session_compact", (_event, c) => {
      ctx = c;
      evaluate(false);
    }),
  ]);
  const syncLifecycle = () => lifecycle.set(running || sent.size > 0 || run.instructions.size > 0);

  function settleRun() {
    const finished = run;
    run = newRun();
    // Still queued when an interrupted run ended: the interrupt cleared Pi's queue (TUI Esc).
    // Written in without a run; a failure leaves the lease to expire and the command to come back.
    const dropped = finished.aborted ? [...sent] : [];
    for (const [commandId, lease] of dropped) {
      sent.delete(commandId);
      const id = sessionId();
      try {
        if (!id) throw new Error("no session");
        pi.sendMessage(commandMessage(lease.command, id), { triggerTurn: false });
        if (!inSession(commandId)) throw new Error("not in the session after appending");
      } catch (error) {
        reportOnce(deps.text().commands.appendFailed(errorText(error)));
        continue;
      }
      finished.facts.push({ kind: "command", commandId });
      finished.instructions.set(commandId, lease);
      confirm(lease);
    }
    for (const commandId of unansweredAfterInterrupt(finished.facts, finished.aborted)) {
      const lease = finished.instructions.get(commandId);
      if (!lease) continue;
      const notice = { commandId, eventId: lease.command.event_id, instruction: lease.command.instruction };
      // Through the extension's report: a TUI warning, or stderr in print and JSON modes.
      deps.report(deps.text().commands.interrupted(lease.command.origin, notice.instruction.slice(0, 80)));
      pi.events.emit(SEND_CHANNEL, interruptedNotice(notice));
    }
  }

  async function stop() {
    if (!running) return settleConfirmations();
    running = false;
    syncBoundary();
    syncLifecycle();
    controlLane.stop();
    generation++;
    clearTimeout(wakeTimer);
    wakeTimer = undefined;
    claim?.controller.abort();
    claim = undefined;
    // A held lease simply expires on the server and comes back to the next runtime of this session.
    held = undefined;
    await settleConfirmations();
  }

  /** Journal lines are written first, so an ACK cut short here is only redelivered and ACKed later. */
  async function settleConfirmations() {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_GRACE_MS)));
    await Promise.race([Promise.allSettled([...confirming]), grace]);
    clearTimeout(timer);
  }

  return {
    start(c) {
      ctx = c;
      if (running) return;
      const current = deps.connection();
      if (!current) return deps.report(deps.text().commands.noConnection);
      // `command.enabled: false` switches off polling only; presence still runs.
      if (!current.config.command.enabled) return;
      client = current.client;
      const config = current.config.command;
      settings = config;
      heartbeatIntervalMs = current.config.presence.heartbeatIntervalMs;
      running = true;
      syncBoundary();
      syncLifecycle();
      failures = 0;
      lastFailure = undefined;
      const mine = ++generation;
      void (async () => {
        try {
          const opened = await openCommandJournal(config.journal);
          journal = opened.journal;
          if (opened.skippedLines > 0) deps.report(deps.text().commands.journalSkipped(config.journal, opened.skippedLines));
        } catch (error) {
          // Without the journal no delivery could be deduplicated, so the channel stays off.
          deps.report(deps.text().commands.journalUnreadable(config.journal, errorText(error)));
          return;
        }
        // The server lets a runtime claim only after it has seen that runtime's heartbeat.
        const accepted = await deps.server.whenAccepted();
        if (accepted && running && mine === generation) evaluate(false);
      })();
    },
    stop,
    pending: () => ({ held: held?.command.command_id ?? null, queued: [...sent.keys()] }),
    onControlCommand: (kind, handler) => dispatcher.on(kind, handler),
  };
}
