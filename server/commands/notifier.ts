/**
 * Wakes long polls of one session when a command may have become claimable (created, ACKed, its
 * lease expired). A watch is taken before looking at the queue, so a command created between the
 * look and the wait still wakes it.
 */
export class CommandNotifier {
  readonly #watchers = new Map<string, Set<() => void>>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  watch(sessionId: string): { fired: Promise<void>; close(): void } {
    let fire = () => {};
    const fired = new Promise<void>((resolve) => (fire = resolve));
    if (this.#closed) {
      fire();
      return { fired, close: () => {} };
    }
    const set = this.#watchers.get(sessionId) ?? new Set();
    set.add(fire);
    this.#watchers.set(sessionId, set);
    return {
      fired,
      close: () => {
        set.delete(fire);
        if (set.size === 0 && this.#watchers.get(sessionId) === set) this.#watchers.delete(sessionId);
      },
    };
  }

  notify(sessionId: string): void {
    for (const fire of this.#watchers.get(sessionId) ?? []) fire();
  }

  /** Releases every held request (plugin dispose) and answers later watches at once. */
  close(): void {
    this.#closed = true;
    for (const set of this.#watchers.values()) for (const fire of set) fire();
    this.#watchers.clear();
  }
}
