/** The link to the server as one session's requests see it: up, down since when, or unknown; the footer
 * shows an outage once and the channels stay quiet about failures that are the outage itself. */
import { LINK_UNKNOWN, linkStep, quietFailure, type Failure, type LinkSignal, type LinkState } from "./decisions.ts";

export class Link {
  #state: LinkState = LINK_UNKNOWN;
  readonly #changed: (back: number | undefined) => void;

  /** `changed` hears every change of phase, with how long the outage lasted when one ended. */
  constructor(changed: (back: number | undefined) => void) {
    this.#changed = changed;
  }

  get state(): LinkState {
    return this.#state;
  }

  signal(signal: LinkSignal): void {
    const next = linkStep(this.#state, signal, Date.now());
    if (next.state === this.#state) return;
    this.#state = next.state;
    this.#changed(next.back);
  }

  quiet(error: Failure): boolean {
    return quietFailure(error, this.#state);
  }
}
