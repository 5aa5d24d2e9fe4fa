/**
 * One task at a time per key, in arrival order; tasks of different keys run side by side, and a key
 * is forgotten once its last task settles. A failed task does not stop the next one. The project's
 * one way to serialise per key (the server's event acceptance per `event_id`, command writes per
 * session, command creations and approval requests each in one shared turn, the extension's outbox
 * operations per event).
 */
export class Turns {
  readonly #tails = new Map<string, Promise<unknown>>();

  run<T>(key: string, task: () => Promise<T>): Promise<T> {
    const current = (this.#tails.get(key) ?? Promise.resolve()).catch(() => undefined).then(task);
    this.#tails.set(key, current);
    const forget = () => {
      if (this.#tails.get(key) === current) this.#tails.delete(key);
    };
    current.then(forget, forget);
    return current;
  }

  /** Resolves once every task started so far has settled (for a shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled([...this.#tails.values()]);
  }
}
