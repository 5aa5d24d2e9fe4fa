/** What the server said in heartbeat answers: presence writes it, the command channel and the notifier read it, so neither asks presence. */
import type { SessionRunState } from "../../protocol/sessions.ts";

/** The command protocol of a server whose answer names none. */
const UNSTATED_COMMAND_PROTOCOL = 2;

export type ServerHeard = Pick<ServerFacts, "accepted" | "heardIdle" | "commandProtocol" | "whenAccepted" | "onAccepted">;

export class ServerFacts {
  /** Open while presence runs: only then can the server have heard this runtime. */
  #open = false;
  /** The run state of the latest heartbeat the server accepted; undefined when the latest failed. */
  #acceptedState: SessionRunState | undefined;
  #commandProtocol = UNSTATED_COMMAND_PROTOCOL;
  #waiters: ((accepted: boolean) => void)[] = [];
  readonly #listeners = new Set<() => void>();

  open(): void {
    this.#open = true;
  }

  /** Presence stopped: the server forgets this runtime, and whoever waits for an acceptance hears no. */
  close(): void {
    this.#open = false;
    this.forget();
    this.#settle(false);
  }

  accept(state: SessionRunState, commandProtocol: number | undefined): void {
    this.#commandProtocol = commandProtocol ?? UNSTATED_COMMAND_PROTOCOL;
    this.#acceptedState = state;
    this.#settle(true);
    for (const listener of [...this.#listeners]) listener();
  }

  /** A heartbeat failed: the server may not know this runtime's state any more. */
  forget(): void {
    this.#acceptedState = undefined;
  }

  accepted(): boolean {
    return this.#acceptedState !== undefined;
  }

  /** Whether the newest heartbeat the server accepted said idle (only then does it hold an idle long poll). */
  heardIdle(): boolean {
    return this.#open && this.#acceptedState === "idle";
  }

  commandProtocol(): number {
    return this.#commandProtocol;
  }

  /** Resolves true once the server has accepted this runtime's latest heartbeat, false if presence stops first. */
  whenAccepted(): Promise<boolean> {
    if (!this.#open) return Promise.resolve(false);
    return this.accepted() ? Promise.resolve(true) : new Promise((resolve) => this.#waiters.push(resolve));
  }

  /** Calls `listener` after each accepted heartbeat (the server answers again: what waited for it can go); returns the unsubscribe. */
  onAccepted(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => this.#listeners.delete(listener);
  }

  #settle(accepted: boolean): void {
    const pending = this.#waiters;
    this.#waiters = [];
    for (const resolve of pending) resolve(accepted);
  }
}
