/** What the recorded runs of an active session become on the chat channel: the final notice and the
 * optional started, progress and tool-error ones; it observes the recorder only while the session notifies. */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { Config } from "../config/schema-rules.ts";
import { progressDue, toolErrorDue, type ProgressMark } from "../../lifecycle.ts";
import type { Notifier } from "./notifier.ts";
import type { RunRecorder, RunObserver, Observation } from "../run-recorder.ts";
import type { HandOver } from "./hand-over.ts";
import { finalNotice, saidLine, transientNotice, type NoticeContext, type SaidLine } from "./notice-rules.ts";

/** Where notices go now; undefined while the session does not notify. */
export interface NoticeTarget {
  config: Config;
  notifier: Notifier;
  context(): NoticeContext;
  /** Reads now what a notice says of this moment; the returned builder makes the rest (`sampleNoticeContext`). */
  sample(): () => NoticeContext;
}

export interface RunNotices {
  /** Follow the session's activation (`ctx`: the session now, for a run already in progress). */
  setActive(active: boolean, ctx: ExtensionContext): void;
  close(): void;
}

interface RunMarks {
  /** The started notice waits for the run's first request, so it can name the task. */
  startAnnounced: boolean;
  progress: ProgressMark | null;
  lastToolErrorAt: number | null;
}

export function observeRunNotices(recorder: RunRecorder, target: () => NoticeTarget | undefined, handOver: HandOver): RunNotices {
  let marks: RunMarks = { startAnnounced: false, progress: null, lastToolErrorAt: null };
  let progressTimer: ReturnType<typeof setInterval> | undefined;
  let noticeSequence = 0;

  const stopProgressTimer = () => {
    if (progressTimer) clearInterval(progressTimer);
    progressTimer = undefined;
  };

  const sendTransient = (status: "started" | "progress" | "tool_error", line: (context: NoticeContext) => SaidLine) => {
    const to = target();
    const run = recorder.current();
    if (!to || !run) return;
    const sequence = ++noticeSequence;
    const { facts } = run;
    const context = to.sample();
    handOver.enqueue(
      to.notifier,
      () => {
        const c = context();
        return transientNotice(status, line(c), facts, sequence, c);
      },
      { final: false },
    );
  };

  const checkProgress = () => {
    const to = target();
    const run = recorder.current();
    if (!to || !run) return;
    const now = Date.now();
    if (!progressDue(run.facts, marks.progress, now, { ...to.config.progress, progress: to.config.notify.progress })) return;
    marks.progress = { at: now, toolCalls: run.facts.toolCalls };
    const minutes = Math.floor((now - run.facts.startedAt) / 60_000);
    const toolCalls = run.facts.toolCalls;
    sendTransient("progress", (c) =>
      saidLine(c.text.progress(c.text.minutes(minutes), toolCalls), { key: "run_progress", params: { minutes, tool_calls: toolCalls } }, c),
    );
  };

  const observer: RunObserver = {
    start() {
      marks = { startAnnounced: false, progress: null, lastToolErrorAt: null };
      const config = target()?.config;
      if (!config?.notify.progress) return;
      progressTimer = setInterval(checkProgress, Math.min(config.progress.firstAfterMs, config.progress.intervalMs));
      progressTimer.unref();
    },
    request() {
      const to = target();
      if (!marks.startAnnounced && to?.config.notify.started) sendTransient("started", (c) => saidLine(c.text.started, { key: "run_started", params: {} }, c));
      marks.startAnnounced = true;
    },
    toolEnd(_run, event) {
      const to = target();
      const config = to?.config;
      const now = Date.now();
      if (event.isError && to && config && toolErrorDue(config.notify.toolError, marks.lastToolErrorAt, now, config.progress.errorCooldownMs)) {
        marks.lastToolErrorAt = now;
        const result = event.result as { content?: { type: string; text?: string }[] } | undefined;
        const detail = result?.content?.find((c) => c.type === "text")?.text ?? "";
        sendTransient("tool_error", (c) =>
          saidLine(c.text.toolError(event.toolName, detail || null), { key: "tool_error", params: { tool: event.toolName } }, c, {
            param: "detail_from",
            text: detail,
          }),
        );
      }
      checkProgress();
    },
    settled(settled) {
      stopProgressTimer();
      const to = target();
      if (!settled || !to) return;
      const { outcome, run } = settled;
      if (outcome.kind === "completed" && !to.config.notify.completed) return;
      if (outcome.kind === "failed" && !to.config.notify.failed) return;
      const sequence = ++noticeSequence;
      const { facts } = run;
      const context = to.sample();
      // Built after the handler returns (hand-over), from what was read of the moment here.
      handOver.enqueue(to.notifier, () => finalNotice(outcome, facts, context(), sequence), { final: true });
    },
  };
  let observation: Observation | undefined;

  return {
    setActive(on, ctx) {
      if (on && !observation) observation = recorder.observe(observer, { exact: true }, ctx);
      else if (!on && observation) {
        stopProgressTimer();
        observation.close();
        observation = undefined;
      }
    },
    close() {
      stopProgressTimer();
      observation?.close();
      observation = undefined;
    },
  };
}
