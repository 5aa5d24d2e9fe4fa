/**
 * Pi awaits handlers (agent_settled before prompt() resolves), and handing a notice to the
 * notifier validates it and starts the outbox write: so the hand-over runs just after the handler,
 * in order, off Pi's path. Shutdown drains what is still waiting before it flushes.
 */
import type { EventBody } from "../../protocol/events.ts";
import type { Notifier, SendOptions } from "../delivery/notifier.ts";

export interface HandOver {
  enqueue(notifier: Notifier, event: EventBody, options: SendOptions): void;
  /** Hands over everything waiting, now. */
  drain(): void;
}

export function createHandOver(): HandOver {
  const waiting: (() => void)[] = [];
  let timer: ReturnType<typeof setImmediate> | undefined;
  const drain = () => {
    if (timer) clearImmediate(timer);
    timer = undefined;
    for (const send of waiting.splice(0)) send();
  };
  return {
    enqueue(notifier, event, options) {
      waiting.push(() => notifier.send(event, options));
      timer ??= setImmediate(drain);
    },
    drain,
  };
}
