/**
 * The ways a user interrupts a run, in one table for every channel that reports runs: the chat
 * notices must stay silent for each, and the desktop sink must report it cancelled. Both suites
 * drive the same scenarios, so the channels cannot drift apart on what counts as an interrupt.
 */
import type { SinkEventType } from "../../protocol/sink.ts";
import { ai, blockingTool, latch, waitForAbortStep, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";

export interface AbortScenario {
  name: string;
  /** The sink events the interrupted run produces, in order. */
  sinkEvents: SinkEventType[];
  /** A fresh copy of the scenario: the Pi options it needs, then the run and its interrupt. */
  prepare(): { pi: StartPiOptions; interrupt(pi: PiHarness): Promise<void> };
}

export const ABORT_SCENARIOS: AbortScenario[] = [
  {
    name: "while the model streams",
    sinkEvents: ["run.started", "run.cancelled"],
    prepare: () => ({
      pi: {},
      async interrupt(pi) {
        const streaming = latch();
        pi.script([waitForAbortStep(streaming.signal)]);
        const run = pi.prompt("long answer please");
        await streaming.promise;
        await pi.session.abort();
        await run;
      },
    }),
  },
  {
    name: "inside a tool",
    // The cancelled call still closes on the app, as not ok.
    sinkEvents: ["run.started", "tool.started", "tool.completed", "run.cancelled"],
    prepare: () => {
      const started = latch();
      return {
        pi: { tools: [blockingTool(started.signal)] },
        async interrupt(pi) {
          pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("wait_for_abort", {}, { id: "call-x" })], { stopReason: "toolUse" })]);
          const run = pi.prompt("run the long command");
          await started.promise;
          await pi.session.abort();
          await run;
        },
      };
    },
  },
  {
    name: "during the auto-retry back-off",
    sinkEvents: ["run.started", "run.cancelled"],
    prepare: () => ({
      pi: { settings: { retry: { enabled: true, maxRetries: 3, baseDelayMs: 600_000 } } },
      async interrupt(pi) {
        const retrying = latch();
        const unsubscribe = pi.session.subscribe((event) => {
          if (event.type === "auto_retry_start") retrying.signal();
        });
        pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "503 overloaded" })]);
        const run = pi.prompt("flaky provider");
        await retrying.promise;
        await pi.session.abort();
        await run;
        unsubscribe();
      },
    }),
  },
];
