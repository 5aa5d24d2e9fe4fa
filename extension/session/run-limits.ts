/** Run limits (`--anon-notify-limits`, from a host's start job): a run past its turns or minutes is stopped as Esc would stop it, marked so its final
 * notice says why (`turn_limit` / `time_limit`), and the terminal says so. Never awaits anything in a Pi handler. */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { LIMITS_FLAG } from "../../activation.ts";
import { type LimitHit, limitHit, limitsFromFlag, msUntilTimeLimit, withLimitHit } from "../../lifecycle.ts";
import type { RunLimits } from "../../protocol/hosts.ts";
import type { Observation, RecordedRun, RunRecorder } from "../run-recorder.ts";
import type { Messages } from "../texts/messages.ts";
import type { Report } from "./report.ts";

export interface RunLimitsDeps {
  report: Report;
  text: () => Messages;
  /** Runs `fire` after `ms`; returns its cancel. Injected by tests (the time limit without waiting for it). */
  schedule?: (ms: number, fire: () => void) => () => void;
}

function realSchedule(ms: number, fire: () => void): () => void {
  const timer = setTimeout(fire, ms).unref();
  return () => clearTimeout(timer);
}

/** Registers `--anon-notify-limits` (call from the extension factory) and follows it from each session's start. */
export function installRunLimits(pi: ExtensionAPI, recorder: RunRecorder, deps: RunLimitsDeps): void {
  pi.registerFlag(LIMITS_FLAG, { type: "string", description: deps.text().session.limitsFlagDescription });
  const { schedule = realSchedule } = deps;
  let limits: RunLimits = {};
  let observation: Observation | undefined;
  let cancelTimer: (() => void) | undefined;

  const stop = (run: RecordedRun, ctx: ExtensionContext, hit: LimitHit) => {
    if (run.facts.limitHit) return;
    run.facts = withLimitHit(run.facts, hit);
    deps.report(deps.text().session.limitStopped(hit, limits), "warning");
    try {
      ctx.abort();
    } catch {
      // A stale ctx: the session was replaced, and with it this run.
    }
  };
  const check = (run: RecordedRun, ctx: ExtensionContext) => {
    const hit = limitHit(limits, { turns: run.facts.turns, elapsedMs: Date.now() - run.facts.startedAt });
    if (hit) stop(run, ctx, hit);
  };
  const clearTimer = () => {
    cancelTimer?.();
    cancelTimer = undefined;
  };

  pi.on("session_start", (_event, ctx) => {
    const read = limitsFromFlag(pi.getFlag(LIMITS_FLAG));
    if ("invalid" in read) deps.report(deps.text().session.limitsInvalid(JSON.stringify(pi.getFlag(LIMITS_FLAG) ?? null).slice(0, 80)), "error");
    // Invalid: a limit of no turns, so nothing runs unbounded.
    const wanted = "invalid" in read ? { turns: 0 } : read.limits;
    if (!wanted || observation) return;
    limits = wanted;
    observation = recorder.observe(
      {
        start(run, runCtx) {
          clearTimer();
          const wait = msUntilTimeLimit(limits, Date.now() - run.facts.startedAt);
          if (wait !== undefined) cancelTimer = schedule(wait, () => recorder.current() === run && stop(run, runCtx, "time_limit"));
        },
        turn: check,
        settled: clearTimer,
      },
      { exact: false },
      ctx,
    );
  });
  pi.on("session_shutdown", () => {
    clearTimer();
    observation?.close();
    observation = undefined;
  });
}
