/** Wakes a lane's long polls; a watch is taken before looking at the queue, so a command created in between
 * still wakes it. */
import type { CommandLane } from "../../protocol/queue.ts";

// Session ids never contain a space (protocol Id).
const keyOf = (sessionId: string, lane: CommandLane) => `${lane} ${sessionId}`;

export class LongPollWaker {
  readonly #watchers = new Map<string, Set<() => void>>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  /** `until` resolves on a wake-up, after `ms`, or when `signal` aborts, and leaves no timer or listener behind. */
  watch(
    sessionId: string,
    lane: CommandLane = "instructions",
  ): { fired: Promise<void>; until(ms: number, signal?: AbortSignal): Promise<void>; close(): void } {
    let fire = () => {};
    const fired = new Promise<void>((resolve) => (fire = resolve));
    const until = (ms: number, signal?: AbortSignal) =>
      new Promise<void>((resolve) => {
        const done = () => {
          clearTimeout(timer);
          signal?.removeEventListener("abort", done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        signal?.addEventListener("abort", done, { once: true });
        void fired.then(done);
      });
    if (this.#closed) {
      fire();
      return { fired, until, close: () => {} };
    }
    const key = keyOf(sessionId, lane);
    const set = this.#watchers.get(key) ?? new Set();
    set.add(fire);
    this.#watchers.set(key, set);
    return {
      fired,
      until,
      close: () => {
        set.delete(fire);
        if (set.size === 0 && this.#watchers.get(key) === set) this.#watchers.delete(key);
      },
    };
  }

  wake(sessionId: string, lane: CommandLane = "instructions"): void {
    for (const fire of this.#watchers.get(keyOf(sessionId, lane)) ?? []) fire();
  }

  /** Releases every held request (plugin dispose) and answers later watches at once. */
  close(): void {
    this.#closed = true;
    for (const set of this.#watchers.values()) for (const fire of set) fire();
    this.#watchers.clear();
  }
}
