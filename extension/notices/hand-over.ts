/** Hands notices to the notifier just after the Pi handler, in order, so validating, building and the
 * outbox write stay off Pi's path (Pi awaits handlers). Shutdown drains what is still waiting. */
import type { EventBody } from "../../protocol/events.ts";
import type { Notifier, SendOptions } from "./notifier.ts";

/** A notice, or the builder of one (undefined: nothing to send). */
export type NoticeToHand = EventBody | (() => EventBody | undefined);

export interface HandOver {
  enqueue(notifier: Notifier, notice: NoticeToHand, options: SendOptions): void;
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
