/** The sink's bounded queue and its one worker: `push` only stores, and when the app is slow the oldest
 * events go first (the newest state is what the app must show). */

export const SINK_QUEUE_CAPACITY = 256;

/** `send` must settle for every item; whatever it throws is swallowed, the event is then lost. */
export function createSinkQueue<T>(send: (item: T) => Promise<void>, capacity = SINK_QUEUE_CAPACITY) {
  const items: T[] = [];
  let dropped = 0;
  let working = false;
  let closed = false;
  const idleWaiters = new Set<() => void>();

  async function drain(): Promise<void> {
    for (let item = items.shift(); item !== undefined; item = items.shift()) {
      await send(item).catch(() => undefined);
    }
    working = false;
    for (const wake of idleWaiters) wake();
    idleWaiters.clear();
  }
  const whenIdle = () => new Promise<void>((resolve) => (working ? idleWaiters.add(resolve) : resolve()));

  return {
    push(item: T): void {
      if (closed) return;
      if (items.length >= capacity) {
        items.shift();
        dropped++;
      }
      items.push(item);
      if (!working) {
        working = true;
        // Start on the next turn of the event loop, outside the Pi handler that pushed.
        setImmediate(() => void drain());
      }
    },
    /** Events thrown away because the queue was full (or left over at close). */
    get dropped() {
      return dropped;
    },
    get size() {
      return items.length;
    },
    idle: whenIdle,
    /** Stops taking events, lets the worker drain for at most `drainMs`, then discards the rest. */
    async close(drainMs: number): Promise<void> {
      closed = true;
      let timer: NodeJS.Timeout | undefined;
      await Promise.race([whenIdle(), new Promise<void>((resolve) => (timer = setTimeout(resolve, drainMs)))]);
      clearTimeout(timer);
      dropped += items.length;
      items.length = 0;
    },
  };
}
