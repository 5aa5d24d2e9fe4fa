/** A notice's line in the page's words: a checked `said` worded from the page's catalogue, else the
 * summary as the notice carried it. */
import type { ReadSaid } from "../../protocol/said.ts";
import { wordSaid } from "../../common/said-words.ts";

type Translate = (key: string, params?: Record<string, unknown>) => string;

export function saidText(said: ReadSaid | null | undefined, summary: string, t: Translate, te: (key: string) => boolean): string {
  if (!said) return summary;
  const words = {
    inProject: (project: string, line: string) => t("said.inProject", { project, line }),
    completed: t("said.completed"),
    failed: (why: string) => t("said.failed", { why }),
    failedBecause: (why: string, error: string) => t("said.failedBecause", { why, error }),
    failure: (reason: string) => failureText(reason, t, te),
    stage: (stage: string) => t(`said.stage.${stage}`),
    severity: (severity: string) => (severity === "info" ? "" : t(`said.severity.${severity}`)),
    report: (mark: string, stage: string, text: string) => t("said.report", { mark, stage, text }),
    detail: (detail: string) => t("said.detail", { detail }),
    started: t("said.started"),
    progress: (minutes: number, calls: number) => t("said.progress", { minutes, calls }),
    toolError: (tool: string) => t("said.toolError", { tool }),
    toolErrorBecause: (tool: string, detail: string) => t("said.toolErrorBecause", { tool, detail }),
    needsYou: (title: string) => t("said.needsYou", { title }),
    needsYouDialog: (kind: string) => t("said.needsYouDialog", { kind }),
    dialog: (kind: string) => t(`said.dialog.${kind}`),
  };
  return wordSaid(said, words) ?? summary;
}

/** Why a run failed, in the page's words: a failure code the page knows is worded, another stays the code it is. Pure. */
export function failureText(code: string, t: (key: string) => string, te: (key: string) => boolean): string {
  return te(`failure.${code}`) ? t(`failure.${code}`) : code;
}
