/**
 * The `[EXTERNAL_AUTOMATION_EVENT]` block handed to the persona: the event's JSON between the two
 * markers and nothing after. A closing marker inside any field is written as `[\/EXTERNAL_AUTOMATION_EVENT]`,
 * which is the same string to a JSON parser, so agent-written text cannot end the block early.
 * Likewise no `{{` survives: YesImBot renders its prompt with Mustache and re-renders the output,
 * so a `{{name}}` in agent text would be replaced by prompt data; it is written `\u007b{`.
 */
import type { EventBody } from "../../protocol/events.ts";

export const OPEN_MARKER = "[EXTERNAL_AUTOMATION_EVENT]";
export const CLOSE_MARKER = "[/EXTERNAL_AUTOMATION_EVENT]";

/** What the persona sees of an event: everything it may reason about, nothing internal. */
export function blockPayload(event: EventBody, receivedAt: string) {
  return {
    event_id: event.event_id,
    session_id: event.session_id,
    source: event.source,
    task: event.task,
    status: event.status,
    summary: event.summary,
    context_usage: event.context_usage,
    details: event.details,
    url: event.url,
    created_at: event.created_at,
    received_at: receivedAt,
  };
}

// Case-insensitive: a model reading the block would treat `[/external_automation_event]` as a close too.
const closingMarker = /\[\/(EXTERNAL_AUTOMATION_EVENT)\]/gi;

export function escapeClosingMarkers(json: string): string {
  return json.replace(closingMarker, "[\\/$1]");
}

// Pretty-printed JSON never puts two braces side by side, so every `{{` is inside a string value.
const templateOpening = /\{(?=\{)/g;

function escapeTemplateOpenings(json: string): string {
  return json.replace(templateOpening, "\\u007b");
}

export function buildEventBlock(event: EventBody, receivedAt: string): string {
  const data = escapeTemplateOpenings(escapeClosingMarkers(JSON.stringify(blockPayload(event, receivedAt), null, 2)));
  return `${OPEN_MARKER}\n${data}\n${CLOSE_MARKER}`;
}
