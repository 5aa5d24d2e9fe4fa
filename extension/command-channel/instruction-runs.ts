/** What one top-level run did with instructions: an instruction an interrupt left unanswered is reported
 * to the person and, as a `warning` notice whose event id names the command, to the persona. */
import type { ClaimedCommand } from "../../protocol/queue.ts";
import type { Messages } from "../texts/messages.ts";
import type { SendRequest } from "../../protocol/state-bus.ts";
import { interruptedNotice, type RunFact, unansweredAfterInterrupt } from "./instruction-rules.ts";

export interface Lease {
  command: ClaimedCommand;
  token: string;
}

export class RunRecord {
  readonly #facts: RunFact[] = [];
  readonly #instructions = new Map<string, Lease>();
  #aborted = false;

  /** An assistant message ended; `aborted` marks the run interrupted. */
  assistant(stopReason: string): void {
    this.#facts.push({ kind: "assistant", stopReason });
    if (stopReason === "aborted") this.#aborted = true;
  }

  /** The run was interrupted (seen on a turn end or the run's end). */
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

  /** What no assistant message answered after the instruction, in an interrupted run. */
  unanswered(): Lease[] {
    return unansweredAfterInterrupt(this.#facts, this.#aborted).flatMap((commandId) => this.#instructions.get(commandId) ?? []);
  }
}

export interface InterruptReport {
  /** Through the extension's report: a TUI warning, or stderr in print and JSON modes. */
  report: (message: string) => void;
  notify: (request: SendRequest) => void;
  text: () => Messages;
}

export function reportInterrupted(lease: Lease, to: InterruptReport): void {
  const { command_id, event_id, instruction, origin } = lease.command;
  to.report(to.text().commands.interrupted(origin, instruction.slice(0, 80)));
  to.notify(interruptedNotice({ commandId: command_id, eventId: event_id, instruction }, to.text().notice.interrupted));
}
