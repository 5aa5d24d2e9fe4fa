/**
 * Waiting on a condition in a test, a harness or a bench: polled, bounded in time (a count of tries
 * lasts as long as its checks take, which load stretches), and failing with what never happened, so a
 * slow machine makes a test slower, never wrong, and a broken one fails instead of hanging. The
 * project's one wait helper; `undefined` and `false` mean "not yet".
 */
import type { ChildProcess } from "node:child_process";
import { setTimeout as delay } from "node:timers/promises";

/** `what` names the condition; a function is read at the deadline, to say what was last seen. */
export async function waitUntil<T>(
  check: () => T | undefined | false | Promise<T | undefined | false>,
  what: string | (() => string),
  timeoutMs = 10_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error(`never happened within ${timeoutMs} ms: ${typeof what === "string" ? what : what()}`);
    await delay(10);
  }
}

/**
 * Wake-ups for harnesses that record what arrives: `until` checks again on every `changed()` and
 * gives up at the deadline, so a wait ends as soon as its condition holds without polling.
 */
export class ChangeWaiters {
  readonly #waiters = new Set<() => void>();

  changed(): void {
    for (const wake of [...this.#waiters]) wake();
  }

  /** Resolves at the next `changed()` or after `ms`, whichever comes first. */
  next(ms: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const wake = () => {
        clearTimeout(timer);
        this.#waiters.delete(wake);
        resolve();
      };
      const timer = setTimeout(wake, ms);
      this.#waiters.add(wake);
    });
  }
}

/** A child process's first line on stdout, within `timeoutMs`; fails at once if the child exits first. */
export async function firstLine(child: ChildProcess, what: string, timeoutMs = 30_000): Promise<string> {
  let output = "";
  child.stdout!.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  return waitUntil(
    () => {
      const end = output.indexOf("\n");
      if (end >= 0) return output.slice(0, end);
      if (child.exitCode !== null || child.signalCode !== null) throw new Error(`the child exited before ${what}; its output: ${output}`);
      return undefined;
    },
    () => `${what}; output so far: ${output}`,
    timeoutMs,
  );
}
