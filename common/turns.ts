/** One task at a time per key, in arrival order, different keys side by side: the project's one way to
 * serialise per key. A failed task does not stop the next one. */
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
