/** Why a platform refused a send, cause first (status and platform code before the adapter's words), so a
 * short receipt never loses them. */
import { errorText } from "../../common/errors.ts";

type ErrorFacts = { errors?: unknown; code?: unknown; url?: unknown; args?: unknown; response?: { status?: unknown } };

export function failureCause(error: unknown, maxChars: number): string {
  const facts: ErrorFacts = typeof error === "object" && error !== null ? error : {};
  // Satori's AggregateError (an adapter that collects its failures, Discord's) has no words of its own.
  if (Array.isArray(facts.errors) && facts.errors.length > 0) return failureCause(facts.errors[0], maxChars);
  // OneBot's SenderError: `code` is the implementation's retcode, `url` the action; its message
  // repeats the action's whole arguments (the message text) before the retcode, so it is left out.
  if (typeof facts.code === "number" && typeof facts.url === "string" && "args" in facts) return cut(`retcode ${facts.code} (${facts.url})`, maxChars);
  const head: string[] = [];
  if (typeof facts.response?.status === "number") head.push(`HTTP ${facts.response.status}`);
  if (typeof facts.code === "number" || (typeof facts.code === "string" && facts.code)) head.push(`code ${facts.code}`);
  const words = errorText(error);
  return cut(head.length > 0 ? `${head.join(", ")}: ${words}` : words, maxChars);
}

/** At most `maxChars` characters, never half a surrogate pair. */
function cut(text: string, maxChars: number): string {
  const chars = [...text];
  return chars.length <= maxChars ? text : `${chars.slice(0, maxChars - 1).join("")}…`;
}
