/** The one tell-once: each distinct failure is told once, until `clear` says things work again. */
export class ReportOnce {
  readonly #sink: (message: string) => void;
  #last: string | undefined;

  constructor(sink: (message: string) => void) {
    this.#sink = sink;
  }

  report(message: string): void {
    if (message !== this.#last) this.#sink(message);
    this.#last = message;
  }

  clear(): void {
    this.#last = undefined;
  }
}
