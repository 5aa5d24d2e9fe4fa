/** When to claim, when a claimed instruction may be handed to Pi, how long an idle session waits, and
 * which instructions an interrupted run left unanswered. */
import type { Messages } from "../texts/messages.ts";
import type { SendRequest } from "../../protocol/state-bus.ts";
import type { ClaimedCommand } from "../../protocol/queue.ts";

export interface ClaimFacts {
  running: boolean;
  idle: boolean;
  /** The server's newest accepted heartbeat said idle; before that it would answer an idle long poll at once, so none is sent. */
  serverHeardIdle: boolean;
  /** Called from a turn end: the one moment a busy session may claim. */
  atBoundary: boolean;
  claimInFlight: boolean;
  /** A claimed command not yet done with: held for a boundary, queued in Pi, or being journaled and ACKed. */
  outstanding: boolean;
  backingOff: boolean;
}

export type ClaimKind = "idle" | "boundary";

export function planClaim(facts: ClaimFacts, longPollMs: number): { claim: false } | { claim: true; kind: ClaimKind; waitMs: number } {
  if (!facts.running || facts.claimInFlight || facts.outstanding || facts.backingOff) return { claim: false };
  if (facts.idle) return facts.serverHeardIdle ? { claim: true, kind: "idle", waitMs: longPollMs } : { claim: false };
  if (facts.atBoundary) return { claim: true, kind: "boundary", waitMs: 0 };
  return { claim: false };
}

/** Whether a turn-end listener is of use (it costs a context preview per turn): while a claimed command waits for a boundary, and on a tool turn the run
 * goes on after. A run's last turn goes without: what arrives then is claimed when the run settles. */
export function wantsTurnEnd(facts: { running: boolean; held: boolean; toolTurn: boolean }): boolean {
  return facts.running && (facts.held || facts.toolTurn);
}

/** `ack-only` when journaled or already in the session (the branch marker); `deliver` only where Pi takes the steer without a gap: idle, or inside a
 * turn-end handler (Pi reads its steer queue right after); any other busy moment may be the tail of a run whose queue was already read. */
export function planDelivery(facts: { alreadyDelivered: boolean; idle: boolean; atBoundary: boolean }): "ack-only" | "deliver" | "hold" {
  if (facts.alreadyDelivered) return "ack-only";
  return facts.idle || facts.atBoundary ? "deliver" : "hold";
}

/** The wait after an empty claim while idle: none after a turn-end or a held claim; an early answer no sooner than `minIntervalMs` after it started. */
export function repollDelay(kind: ClaimKind, elapsedMs: number, minIntervalMs: number): number {
  return kind === "boundary" ? 0 : Math.max(0, minIntervalMs - elapsedMs);
}

export type RunFact = { kind: "command"; commandId: string } | { kind: "assistant"; stopReason: string };

const ANSWERING_STOPS = new Set(["stop", "toolUse", "length"]);

/** Commands an interrupted run took in that no assistant message answered (a failed run has its failure notice). */
export function unansweredAfterInterrupt(facts: readonly RunFact[], aborted: boolean): string[] {
  if (!aborted) return [];
  const waiting: string[] = [];
  for (const fact of facts) {
    if (fact.kind === "command") waiting.push(fact.commandId);
    else if (ANSWERING_STOPS.has(fact.stopReason)) waiting.length = 0;
  }
  return waiting;
}

/** The persona-facing warning for an instruction that reached the session but got no answer, in the session's language. */
export function interruptedNotice(command: { commandId: string; eventId: string; instruction: string }, t: Messages["notice"]["interrupted"]): SendRequest {
  const preview = command.instruction.length > 120 ? `${command.instruction.slice(0, 120)}…` : command.instruction;
  const eventId = `cmd-interrupted:${command.commandId}`;
  return {
    status: "warning",
    task: t.task,
    summary: t.summary(preview),
    ...(eventId.length <= 80 ? { eventId } : {}),
    details: { command_id: command.commandId, event_id: command.eventId, reason: "interrupted" },
  };
}

export type Lease = { command: ClaimedCommand; token: string };

/** What one top-level run did with instructions, for the ones an interrupt left unanswered. */
export class RunRecord {
  readonly #facts: RunFact[] = [];
  readonly #instructions = new Map<string, Lease>();
  #aborted = false;

  assistant(stopReason: string): void {
    this.#facts.push({ kind: "assistant", stopReason });
    if (stopReason === "aborted") this.#aborted = true;
  }

  abort(): void {
    this.#aborted = true;
  }

  get aborted(): boolean {
    return this.#aborted;
  }

  tookIn(lease: Lease): void {
    this.#facts.push({ kind: "command", commandId: lease.command.command_id });
    this.#instructions.set(lease.command.command_id, lease);
  }

  /** Instructions this run still owes a report for once it settles. */
  get holdsInstructions(): boolean {
    return this.#instructions.size > 0;
  }

  unanswered(): Lease[] {
    return unansweredAfterInterrupt(this.#facts, this.#aborted).flatMap((commandId) => this.#instructions.get(commandId) ?? []);
  }
}
