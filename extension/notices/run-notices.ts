/** What the recorded runs of an active session become on the chat channel: the final notice and the
 * optional started, progress and tool-error ones; it observes the recorder only while the session notifies. */
import type { ExtensionContext, ToolExecutionEndEvent } from "@earendil-works/pi-coding-agent";
import { progressDue, toolErrorDue, type ProgressMark, type RunOutcome } from "../../lifecycle.ts";
import type { RunRecorder, RunObserver, Observation, RecordedRun } from "../run-recorder.ts";
import type { HandOver, NoticeTarget } from "./hand-over.ts";
import { finalNotice, saidLine, transientNotice, type NoticeContext, type SaidLine } from "./notice-rules.ts";

const NO_MARKS = { startAnnounced: false, progress: null as ProgressMark | null, lastToolErrorAt: null as number | null };

export class RunNotices implements RunObserver {
  readonly #recorder: RunRecorder;
  readonly #target: () => NoticeTarget | undefined;
  readonly #handOver: HandOver;
  #marks = { ...NO_MARKS };
  #progressTimer: ReturnType<typeof setInterval> | undefined;
  #noticeSequence = 0;
  #observation: Observation | undefined;

  constructor(recorder: RunRecorder, target: () => NoticeTarget | undefined, handOver: HandOver) {
    this.#recorder = recorder;
    this.#target = target;
    this.#handOver = handOver;
  }

  /** Follow the session's activation (`ctx`: the session now, for a run already in progress). */
  setActive(on: boolean, ctx: ExtensionContext): void {
    if (on && !this.#observation) this.#observation = this.#recorder.observe(this, { exact: true }, ctx);
    else if (!on && this.#observation) this.close();
  }

  close(): void {
    clearInterval(this.#progressTimer);
    this.#observation?.close();
    this.#observation = undefined;
  }

  start(): void {
    this.#marks = { ...NO_MARKS };
    const config = this.#target()?.config;
    if (!config?.notify.progress) return;
    this.#progressTimer = setInterval(() => this.#checkProgress(), Math.min(config.progress.firstAfterMs, config.progress.intervalMs)).unref();
  }

  /** The started notice waits for the run's first request, so it can name the task. */
  request(): void {
    if (!this.#marks.startAnnounced && this.#target()?.config.notify.started)
      this.#sendTransient("started", (c) => saidLine(c.text.started, { key: "run_started", params: {} }, c));
    this.#marks.startAnnounced = true;
  }

  toolEnd(_run: RecordedRun, event: ToolExecutionEndEvent): void {
    const config = this.#target()?.config;
    const now = Date.now();
    if (event.isError && config && toolErrorDue(config.notify.toolError, this.#marks.lastToolErrorAt, now, config.progress.errorCooldownMs)) {
      this.#marks.lastToolErrorAt = now;
      const detail = (event.result as { content?: { type: string; text?: string }[] } | undefined)?.content?.find((c) => c.type === "text")?.text ?? "";
      const tail = { param: "detail_from", text: detail } as const;
      const params = { tool: event.toolName };
      this.#sendTransient("tool_error", (c) => saidLine(c.text.toolError(event.toolName, detail || null), { key: "tool_error", params }, c, tail));
    }
    this.#checkProgress();
  }

  settled(settled: { run: RecordedRun; outcome: RunOutcome } | undefined): void {
    clearInterval(this.#progressTimer);
    const to = this.#target();
    if (!settled || !to) return;
    const { outcome, run } = settled;
    const { facts } = run;
    if (outcome.kind === "completed" && !to.config.notify.completed) return;
    if (outcome.kind === "failed" && !to.config.notify.failed) return;
    const sequence = ++this.#noticeSequence;
    const context = to.sample();
    // Built after the handler returns (hand-over), from what was read of the moment here.
    this.#handOver.enqueue(to.notifier, () => finalNotice(outcome, facts, context(), sequence), { final: true });
  }

  #sendTransient(status: "started" | "progress" | "tool_error", line: (context: NoticeContext) => SaidLine): void {
    const to = this.#target();
    const run = this.#recorder.current();
    if (!to || !run) return;
    const sequence = ++this.#noticeSequence;
    const { facts } = run;
    const context = to.sample();
    this.#handOver.enqueue(
      to.notifier,
      () => {
        const c = context();
        return transientNotice(status, line(c), facts, sequence, c);
      },
      { final: false },
    );
  }

  #checkProgress(): void {
    const to = this.#target();
    const run = this.#recorder.current();
    if (!to || !run) return;
    const now = Date.now();
    if (!progressDue(run.facts, this.#marks.progress, now, { ...to.config.progress, progress: to.config.notify.progress })) return;
    this.#marks.progress = { at: now, toolCalls: run.facts.toolCalls };
    const minutes = Math.floor((now - run.facts.startedAt) / 60_000);
    const toolCalls = run.facts.toolCalls;
    this.#sendTransient("progress", (c) =>
      saidLine(c.text.progress(c.text.minutes(minutes), toolCalls), { key: "run_progress", params: { minutes, tool_calls: toolCalls } }, c),
    );
  }
}
