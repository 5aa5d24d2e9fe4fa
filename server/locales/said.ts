/**
 * A notice's summary as this server words it: the extension's own line (`details.said`) in the
 * server's language with the agent's words kept as they came, or, for anything that cannot be
 * checked (another sender, an unknown key, values that do not fit, a key that disagrees with the
 * status), the summary unchanged. Pure.
 */
import type { EventBody } from "../../protocol/events.ts";
import { readSaid } from "../../protocol/said.ts";
import type { Say } from "./load.ts";

export function saidSummary(event: Pick<EventBody, "event_id" | "status" | "summary" | "details">, say: Say): string {
  const read = readSaid(event);
  if (!read) return event.summary;
  const { said, agent } = read;
  let line: string;
  if (said.key === "run_completed") {
    line = agent || say("anon-notify.said.completed");
  } else if (said.key === "run_failed") {
    const why = say(`anon-notify.said.failure.${said.params.reason}`);
    const head = said.params.error ? say("anon-notify.said.failed-because", [why, said.params.error]) : say("anon-notify.said.failed", [why]);
    line = agent ? `${head}\n${agent}` : head;
  } else {
    const { severity, stage, text } = said.params;
    const mark = severity === "info" ? "" : say(`anon-notify.said.severity.${severity}`);
    line = say("anon-notify.said.report", [mark, say(`anon-notify.said.stage.${stage}`), text]);
    if (agent) line += `\n${say("anon-notify.said.detail", [agent])}`;
  }
  return said.params.project === undefined ? line : say("anon-notify.said.in-project", [said.params.project, line]);
}
