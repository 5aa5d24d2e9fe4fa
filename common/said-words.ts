/** How a checked `details.said` line is composed from one language's words; the server and the console
 * page share it, each with its own words. Free of zod, so the console page bundles it too. */
import type { ProgressSeverity, ProgressStage } from "../protocol/progress.ts";
import type { DialogKind, FailureReason, ReadSaid } from "../protocol/said.ts";

export interface SaidWords {
  inProject(project: string, line: string): string;
  completed: string;
  failed(why: string): string;
  failedBecause(why: string, error: string): string;
  failure(reason: FailureReason): string;
  stage(stage: ProgressStage): string;
  /** The mark before a report's stage; "" for `info`. */
  severity(severity: ProgressSeverity): string;
  report(mark: string, stage: string, text: string): string;
  detail(detail: string): string;
  started: string;
  progress(minutes: number, toolCalls: number): string;
  toolError(tool: string): string;
  toolErrorBecause(tool: string, detail: string): string;
  /** Pi waits on a dialog, named by its title. */
  needsYou(title: string): string;
  /** Pi waits on a dialog with no title, named by its kind's word. */
  needsYouDialog(kind: string): string;
  dialog(kind: DialogKind): string;
}

/** The line in `w`'s words; undefined for a key this code does not know (a reader then shows the summary). */
export function wordSaid({ said, agent }: ReadSaid, w: SaidWords): string | undefined {
  let line: string;
  switch (said.key) {
    case "run_completed":
      line = agent || w.completed;
      break;
    case "run_failed": {
      const why = w.failure(said.params.reason);
      const head = said.params.error ? w.failedBecause(why, said.params.error) : w.failed(why);
      line = agent ? `${head}\n${agent}` : head;
      break;
    }
    case "report": {
      const { severity, stage, text } = said.params;
      line = w.report(w.severity(severity), w.stage(stage), text);
      if (agent) line += `\n${w.detail(agent)}`;
      break;
    }
    case "run_started":
      line = w.started;
      break;
    case "run_progress":
      line = w.progress(said.params.minutes, said.params.tool_calls);
      break;
    case "tool_error":
      line = agent ? w.toolErrorBecause(said.params.tool, agent) : w.toolError(said.params.tool);
      break;
    case "needs_you":
      line = said.params.title ? w.needsYou(said.params.title) : w.needsYouDialog(w.dialog(said.params.kind));
      break;
    default:
      return undefined;
  }
  return said.params.project === undefined ? line : w.inProject(said.params.project, line);
}
