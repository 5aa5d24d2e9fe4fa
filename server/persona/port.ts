/** The port between the event worker and whatever persona hears the events. */
import type { Context } from "koishi";
import type { EventBody } from "../../protocol/events.ts";
import type { InjectOutcome } from "../handover/decisions.ts";

/** `block`: the `[EXTERNAL_AUTOMATION_EVENT]` block, exactly as it must reach the conversation; `attempt`: 1 for the first try (a restart after a
 * crash may repeat an attempt that had succeeded). */
export type PersonaEvent = { eventId: string; block: string; event: EventBody; attempt: number };

export type Persona = { readonly name: string; inject(event: PersonaEvent): Promise<InjectOutcome> };
type Offer = { persona: Persona; priority: number };

/** Which persona is present now. Personas come and go with their Koishi scopes (YesImBot can be
 * reloaded without restarting this plugin); the highest priority present one is used. */
export class PersonaSlot {
  readonly #offers = new Set<Offer>();
  readonly #listeners = new Set<() => void>();
  #lostAtMs = 0;

  provide(ctx: Context, persona: Persona, priority: number): void {
    const offer = { persona, priority };
    this.#offers.add(offer);
    this.#changed();
    ctx.on("dispose", () => {
      this.#offers.delete(offer);
      if (this.#offers.size === 0) this.#lostAtMs = Date.now();
      this.#changed();
    });
  }

  current(): Persona | undefined {
    let best: Offer | undefined;
    for (const offer of this.#offers) if (!best || offer.priority > best.priority) best = offer;
    return best?.persona;
  }

  /** When the last persona went away (0 if never). */
  get lostAtMs(): number {
    return this.#lostAtMs;
  }

  onChange(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  #changed(): void {
    for (const listener of this.#listeners) listener();
  }
}
