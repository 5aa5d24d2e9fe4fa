/** A notice's summary as this server words it: a checkable `details.said` line in the server's language, else the summary unchanged. */
import type { EventBody } from "../../protocol/events.ts";
import { readSaid } from "../../protocol/said.ts";
import { wordSaid, type SaidWords } from "../../common/said-words.ts";
import type { Say } from "./load.ts";

function saidWords(say: Say): SaidWords {
  return {
    inProject: (project, line) => say("anon-notify.said.in-project", [project, line]),
    completed: say("anon-notify.said.completed"),
    failed: (why) => say("anon-notify.said.failed", [why]),
    failedBecause: (why, error) => say("anon-notify.said.failed-because", [why, error]),
    failure: (reason) => say(`anon-notify.said.failure.${reason}`),
    stage: (stage) => say(`anon-notify.said.stage.${stage}`),
    severity: (severity) => (severity === "info" ? "" : say(`anon-notify.said.severity.${severity}`)),
    report: (mark, stage, text) => say("anon-notify.said.report", [mark, stage, text]),
    detail: (detail) => say("anon-notify.said.detail", [detail]),
    started: say("anon-notify.said.started"),
    progress: (minutes, toolCalls) => say("anon-notify.said.progress", [minutes, toolCalls]),
    toolError: (tool) => say("anon-notify.said.tool-error", [tool]),
    toolErrorBecause: (tool, detail) => say("anon-notify.said.tool-error-because", [tool, detail]),
    needsYou: (title) => say("anon-notify.said.needs-you", [title]),
    needsYouDialog: (kind) => say("anon-notify.said.needs-you-dialog", [kind]),
    dialog: (kind) => say(`anon-notify.said.dialog.${kind}`),
  };
}

export function saidSummary(event: Pick<EventBody, "event_id" | "status" | "summary" | "details">, say: Say): string {
  const read = readSaid(event);
  return (read && wordSaid(read, saidWords(say))) ?? event.summary;
}
