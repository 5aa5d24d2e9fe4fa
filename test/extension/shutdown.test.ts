/**
 * Shutdown is bounded as a whole: the best-effort offline call and the flush of notices in flight
 * run side by side under the one SHUTDOWN_FLUSH_MS budget, never one after the other.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { closeSession, SHUTDOWN_FLUSH_MS, type SessionService, type SessionState } from "../../extension/session/session.ts";
import { waitUntil } from "../../harness/wait.ts";

test("the offline call and the flush run side by side within one budget", async () => {
  const steps: string[] = [];
  let finishStop = () => {};
  let finishFlush = (_drained: boolean) => {};
  const flushBudgets: number[] = [];
  const service: SessionService = {
    start() {},
    stop: () => new Promise<void>((resolve) => (finishStop = () => (steps.push("stopped"), resolve()))),
  };
  const state = {
    active: true,
    servicesRunning: true,
    subagent: false,
    configState: "valid",
    delivery: {
      notifier: {
        flush: (ms: number) => {
          steps.push("flush");
          flushBudgets.push(ms);
          return new Promise<boolean>((resolve) => (finishFlush = resolve));
        },
        close: async () => void steps.push("notifier closed"),
      },
      receipts: { close: () => void steps.push("receipts closed") },
      client: { close: async () => void steps.push("client closed") },
      outbox: { close: async () => void steps.push("outbox closed") },
    },
  } as unknown as SessionState;

  const closing = closeSession(state, [service]);
  await waitUntil(() => steps.includes("flush"), "the flush started while the services (the offline call) were still stopping", 2_000);
  assert.deepEqual(steps, ["flush"]);
  finishStop();
  finishFlush(false);
  await closing;
  assert.deepEqual(steps, ["flush", "stopped", "receipts closed", "notifier closed", "client closed", "outbox closed"]);
  assert.deepEqual(flushBudgets, [SHUTDOWN_FLUSH_MS]);
});
