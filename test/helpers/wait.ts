/**
 * Waiting on a condition in a test: polled, bounded, and failing with what never happened, so a
 * slow machine makes a test slower, never wrong, and a broken one fails instead of hanging.
 */
import { setTimeout as delay } from "node:timers/promises";

export async function waitUntil<T>(check: () => T | undefined | false | Promise<T | undefined | false>, what: string, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`never happened within ${timeoutMs} ms: ${what}`);
    await delay(10);
  }
}
