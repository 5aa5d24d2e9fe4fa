/**
 * Pi awaits handlers (agent_settled before prompt() resolves), and handing a notice to the
 * notifier validates it and starts the outbox write: so the hand-over runs just after the handler,
 * in order, off Pi's path. A notice may be handed over as its builder (what it says of the moment
 * read already), so building it is off Pi's path too. Shutdown drains what is still waiting before
 * it flushes.
 */
import type { EventBody } from "../../protocol/events.ts";
import type { Notifier, SendOptions } from "./notifier.ts";

/** A notice, or the builder of one (undefined: nothing to send). */
export type NoticeToHand = EventBody | (() => EventBody | undefined);

export interface HandOver {
  enqueue(notifier: Notifier, notice: NoticeToHand, options: SendOptions): void;
  /** Hands over everything waiting, now. */
  drain(): void;
}

/** `failed`: a builder threw (it runs after Pi's handler, so nothing else would hear of it). */
export function createHandOver(failed: (error: unknown) => void): HandOver {
  const waiting: (() => void)[] = [];
  let timer: ReturnType<typeof setImmediate> | undefined;
  const drain = () => {
    if (timer) clearImmediate(timer);
    timer = undefined;
    for (const send of waiting.splice(0)) send();
  };
  return {
    enqueue(notifier, notice, options) {
      waiting.push(() => {
        let event: EventBody | undefined;
        try {
          event = typeof notice === "function" ? notice() : notice;
        } catch (error) {
          return failed(error);
        }
        if (event) notifier.send(event, options);
      });
      timer ??= setImmediate(drain);
    },
    drain,
  };
}
