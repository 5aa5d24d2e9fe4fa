/** Instructions become visible steer messages: one held claim while idle, one claim per tool turn while
 * busy, handed to Pi only at a safe point; each id is journaled before the ACK, so none is delivered twice. */
import { setImmediate } from "node:timers/promises";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { CONTROL_PROTOCOL } from "../../protocol/queue.ts";
import { attachable } from "../pi-handlers.ts";
import { isIdle, type LaneConnection } from "./lane.ts";
import type { ServerHeard } from "../server-client/server-facts.ts";
import { modelSupportsImages } from "../session/label-rules.ts";
import type { Messages } from "../texts/messages.ts";
import type { SendRequest } from "../../protocol/state-bus.ts";
import { interruptedNotice, planClaim, planDelivery, repollDelay, RunRecord, wantsTurnEnd, type ClaimKind, type Lease } from "./instruction-rules.ts";
import { COMMAND_MESSAGE_TYPE, CommandDetails, commandMessage, commandMessageRenderer } from "./instruction-message.ts";

/** How long stopping (deactivation, reload, quit) waits for ACKs already in flight. */
export const STOP_GRACE_MS = 2_000;

/** `server`: what heartbeat answers said (heard idle, protocol, each acceptance); `notify` hands a notice for the persona to the session's notices. */
export type InstructionChannelDeps = { server: ServerHeard; report: (message: string) => void; notify: (request: SendRequest) => void; text: () => Messages };

export class InstructionChannel {
  readonly #pi: ExtensionAPI;
  readonly #deps: InstructionChannelDeps;
  #lane: LaneConnection | undefined;
  #ctx: ExtensionContext | undefined;
  #running = false;
  #claim: { controller: AbortController; heldOpen: boolean; lane: LaneConnection } | undefined;
  #held: Lease | undefined;
  /** The turn in progress ended in tool calls, so the run goes on after them. */
  #toolTurn = false;
  /** Handed to Pi's queue, not yet in the session. */
  readonly #sent = new Map<string, Lease>();
  readonly #confirming = new Set<Promise<void>>();
  #failures = 0;
  #wakeTimer: ReturnType<typeof setTimeout> | undefined;
  #run = new RunRecord();
  // Attached only when a turn end is of use (wantsTurnEnd): a turn_end listener makes Pi build a context preview at every turn.
  readonly #boundary;
  // Attached while the channel runs, and after a stop until what was handed to Pi is confirmed.
  readonly #lifecycle;

  constructor(pi: ExtensionAPI, deps: InstructionChannelDeps) {
    this.#pi = pi;
    this.#deps = deps;
    pi.registerMessageRenderer(COMMAND_MESSAGE_TYPE, commandMessageRenderer(deps.text));
    // An idle long poll waits until the server heard idle (planClaim): an accepted heartbeat may be that moment.
    deps.server.onAccepted(() => {
      if (this.#running && this.#lane?.journal) this.#evaluate(false);
    });
    this.#boundary = attachable(() => [
      pi.on("turn_end", (_event, c) => {
        this.#ctx = c;
        // An interrupted run is no place for a new instruction; it waits for the settle.
        if (c.signal?.aborted) this.#run.abort();
        else this.#evaluate(true);
      }),
    ]);
    this.#lifecycle = attachable(() => [
      pi.on("agent_start", (_event, c) => {
        this.#ctx = c;
        // Busy sessions claim only at turn ends. A protocol-3 server ends the held idle claim on the run's heartbeat (a command leased then is held for
        // the first turn end); an older server's is abandoned.
        if (this.#claim?.heldOpen && deps.server.commandProtocol() < CONTROL_PROTOCOL) this.#claim.controller.abort();
      }),
      pi.on("message_end", (event, c) => {
        this.#ctx = c;
        const message = event.message;
        if (message.role === "assistant") {
          this.#run.assistant(message.stopReason);
          this.#toolTurn = message.stopReason === "toolUse";
          this.#syncBoundary();
          return;
        }
        if (message.role !== "custom" || message.customType !== COMMAND_MESSAGE_TYPE) return;
        const commandId = CommandDetails.safeParse(message.details).data?.command_id;
        const lease = commandId === undefined ? undefined : this.#sent.get(commandId);
        if (!lease) return;
        this.#sent.delete(lease.command.command_id);
        this.#run.tookIn(lease);
        this.#confirm(lease);
      }),
      pi.on("agent_end", (_event, c) => {
        if (c.signal?.aborted) this.#run.abort();
      }),
      pi.on("agent_settled", (_event, c) => {
        this.#ctx = c;
        this.#toolTurn = false;
        this.#syncBoundary();
        this.#settleRun();
        this.#evaluate(false);
        this.#syncLifecycle();
      }),
      pi.on("session_compact", (_event, c) => {
        this.#ctx = c;
        this.#evaluate(false);
      }),
    ]);
  }

  /** Starts claiming for the session of `ctx` on `lane` once it is ready. Idempotent. */
  start(ctx: ExtensionContext, lane: LaneConnection): void {
    this.#ctx = ctx;
    if (this.#running) return;
    this.#lane = lane;
    this.#running = true;
    this.#syncBoundary();
    this.#syncLifecycle();
    this.#failures = 0;
    void lane.ready.then((ready) => {
      if (ready && this.#running && this.#lane === lane) this.#evaluate(false);
    });
  }

  get running(): boolean {
    return this.#running;
  }

  /** Stops claiming and waits for ACKs in flight. Commands already handed to Pi are still confirmed. */
  async stop(): Promise<void> {
    if (!this.#running) return this.#settleConfirmations();
    this.#running = false;
    this.#syncBoundary();
    this.#syncLifecycle();
    clearTimeout(this.#wakeTimer);
    this.#wakeTimer = undefined;
    this.#claim?.controller.abort();
    this.#claim = undefined;
    // A held lease simply expires on the server and comes back to the next runtime of this session.
    this.#held = undefined;
    await this.#settleConfirmations();
  }

  /** Claimed but not yet in the session: held for a boundary, or handed to Pi's queue. */
  pending(): { held: string | null; queued: string[] } {
    return { held: this.#held?.command.command_id ?? null, queued: [...this.#sent.keys()] };
  }

  #supportsImages(): boolean {
    try {
      return modelSupportsImages(this.#ctx?.model);
    } catch {
      return false;
    }
  }

  #sessionId(): string | undefined {
    return this.#ctx?.sessionManager.getSessionId();
  }

  /** The branch marker: the session itself holds the delivered message with this command id. */
  #inSession(commandId: string): boolean {
    try {
      return (this.#ctx?.sessionManager.getEntries() ?? []).some(
        (entry) =>
          entry.type === "custom_message" &&
          entry.customType === COMMAND_MESSAGE_TYPE &&
          CommandDetails.safeParse(entry.details).data?.command_id === commandId,
      );
    } catch {
      return false;
    }
  }

  #wakeAfter(delayMs: number): void {
    clearTimeout(this.#wakeTimer);
    this.#wakeTimer = setTimeout(() => {
      this.#wakeTimer = undefined;
      this.#evaluate(false);
    }, delayMs).unref();
  }

  #evaluate(atBoundary: boolean): void {
    const lease = this.#held;
    if (lease && planDelivery({ alreadyDelivered: false, idle: isIdle(this.#ctx), atBoundary }) === "deliver") {
      this.#held = undefined;
      this.#syncBoundary();
      this.#deliver(lease);
    }
    const plan = planClaim(
      {
        running: this.#running,
        idle: isIdle(this.#ctx),
        serverHeardIdle: this.#deps.server.heardIdle(),
        atBoundary,
        claimInFlight: this.#claim !== undefined,
        // Until its ACK is answered the server still holds our lease on the head and would answer a new claim with nothing.
        outstanding: this.#held !== undefined || this.#sent.size > 0 || this.#confirming.size > 0,
        backingOff: this.#wakeTimer !== undefined,
      },
      this.#lane?.settings.longPollMs ?? 0,
    );
    if (plan.claim) void this.#claimOnce(plan.kind, plan.waitMs);
  }

  async #claimOnce(kind: ClaimKind, waitMs: number): Promise<void> {
    const id = this.#sessionId();
    const lane = this.#lane;
    if (!id || !lane) return;
    const controller = new AbortController();
    const current = { controller, heldOpen: waitMs > 0, lane };
    this.#claim = current;
    // Only this claim's own outcome may clear the slot: a stop and restart may have started another.
    const release = () => {
      if (this.#claim === current) this.#claim = undefined;
    };
    const startedAt = Date.now();
    const capabilities = this.#supportsImages() ? "images" : undefined;
    try {
      // The request is made after the Pi handler that asked for it returns: off Pi's turn.
      await setImmediate();
      controller.signal.throwIfAborted();
      const answer = await lane.claim(id, waitMs, capabilities ? { capabilities } : {}, controller.signal);
      release();
      this.#failures = 0;
      lane.reports.clear();
      if (answer.command) {
        this.#claimed({ command: answer.command, token: answer.lease.token });
      } else if (this.#running && lane === this.#lane && isIdle(this.#ctx)) {
        const delay = repollDelay(kind, Date.now() - startedAt, lane.settings.idlePollIntervalMs);
        if (delay > 0) return this.#wakeAfter(delay);
      }
    } catch (thrown) {
      release();
      if (controller.signal.aborted || lane !== this.#lane || !this.#running) return;
      this.#failures++;
      return this.#wakeAfter(lane.claimFailed(thrown, this.#failures, lane.reports, lane.text.commands.claimFailed));
    }
    this.#evaluate(false);
  }

  #syncBoundary(): void {
    this.#boundary.set(wantsTurnEnd({ running: this.#running, held: this.#held !== undefined, toolTurn: this.#toolTurn }));
  }

  #syncLifecycle(): void {
    this.#lifecycle.set(this.#running || this.#sent.size > 0 || this.#run.holdsInstructions);
  }

  #claimed(lease: Lease): void {
    const { command_id } = lease.command;
    const alreadyDelivered = (this.#lane?.journal?.has(command_id) ?? false) || this.#inSession(command_id) || this.#sent.has(command_id);
    const plan = planDelivery({ alreadyDelivered, idle: isIdle(this.#ctx), atBoundary: false });
    if (plan === "ack-only") {
      // Pi already took this one in (a lease retry, a reload, a restart): confirm, never deliver twice.
      if (!this.#sent.has(command_id)) this.#confirm(lease);
    } else if (plan === "deliver") this.#deliver(lease);
    else {
      this.#held = lease;
      this.#syncBoundary();
    }
  }

  #deliver(lease: Lease): void {
    const id = this.#sessionId();
    if (!id) return;
    this.#sent.set(lease.command.command_id, lease);
    try {
      this.#pi.sendMessage(commandMessage(lease.command, id), { deliverAs: "steer", triggerTurn: true });
    } catch (error) {
      this.#sent.delete(lease.command.command_id);
      this.#lane?.reports.report(this.#lane.text.commands.handOverFailed(errorText(error)));
    }
  }

  /** Journal first, then ACK (lane.confirm): a lost ACK is redelivered and then only ACKed. */
  #confirm(lease: Lease): void {
    const lane = this.#lane;
    if (!lane) return;
    const to = { sessionId: this.#sessionId() ?? "unknown", token: lease.token, journaled: lane.journal?.has(lease.command.command_id) ?? false };
    const task = lane.confirm(lease.command, to, lane.text.commands.ackFailed);
    this.#confirming.add(task);
    void task.finally(() => {
      this.#confirming.delete(task);
      this.#evaluate(false);
    });
  }

  #settleRun(): void {
    const finished = this.#run;
    this.#run = new RunRecord();
    // Still queued when an interrupted run ended (Esc cleared Pi's queue): written in without a run; a failure leaves the lease to expire.
    for (const [commandId, lease] of finished.aborted ? [...this.#sent] : []) {
      this.#sent.delete(commandId);
      const id = this.#sessionId();
      try {
        if (!id) throw new Error("no session");
        this.#pi.sendMessage(commandMessage(lease.command, id), { triggerTurn: false });
        if (!this.#inSession(commandId)) throw new Error("not in the session after appending");
      } catch (error) {
        this.#lane?.reports.report(this.#lane.text.commands.appendFailed(errorText(error)));
        continue;
      }
      finished.tookIn(lease);
      this.#confirm(lease);
    }
    // Told to the person and, as a `warning` notice whose event id names the command, to the persona.
    for (const { command } of finished.unanswered()) {
      const { command_id: commandId, event_id: eventId, instruction, origin } = command;
      const t = this.#deps.text();
      this.#deps.report(t.commands.interrupted(origin, instruction.slice(0, 80)));
      this.#deps.notify(interruptedNotice({ commandId, eventId, instruction }, t.notice.interrupted));
    }
  }

  /** Journal lines are written first, so an ACK cut short here is only redelivered and ACKed later. */
  async #settleConfirmations(): Promise<void> {
    let timer: ReturnType<typeof setTimeout> | undefined;
    const grace = new Promise<void>((resolve) => (timer = setTimeout(resolve, STOP_GRACE_MS)));
    await Promise.race([Promise.allSettled([...this.#confirming]), grace]);
    clearTimeout(timer);
  }
}
