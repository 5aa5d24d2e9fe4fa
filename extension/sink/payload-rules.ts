/** What the sink puts on the wire: the protocol/sink.ts schemas are the whitelist, user text is cut to 500
 * characters with a mark, and absent facts stay absent, never zero. */
import { SINK_TEXT_CHARS, SINK_TRUNCATION_MARK, SinkPayloads, type SinkEnvelope, type SinkEventType, type SinkPayload } from "../../protocol/sink.ts";

/** Cuts to 500 characters (code points, so no surrogate pair is split) and marks the cut. */
export function truncateSinkText(text: string): string {
  const chars = Array.from(text);
  if (chars.length <= SINK_TEXT_CHARS) return text;
  return chars.slice(0, SINK_TEXT_CHARS).join("") + SINK_TRUNCATION_MARK;
}

/** `"Type: message"`, the only error form on the wire; consumers read the kind from the prefix. */
export function formatSinkError(type: string, message: string | undefined): string {
  const detail = message?.trim();
  return truncateSinkText(detail ? `${type}: ${detail}` : `${type}: (no message)`);
}

const TRUNCATED_KEYS = ["prompt", "answer", "error"] as const;

/** Builds an event payload from loose run facts: keys outside the event's whitelist are dropped,
 * `undefined`, `null` and empty strings count as unknown and are left out, long texts are cut.
 * Throws when a required fact is missing: that is a bug in the caller, not bad user input. */
export function buildSinkPayload<T extends SinkEventType>(type: T, facts: Record<string, unknown>): SinkPayload<T> {
  const known: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(facts)) {
    if (value === undefined || value === null || value === "") continue;
    known[key] = typeof value === "string" && (TRUNCATED_KEYS as readonly string[]).includes(key) ? truncateSinkText(value) : value;
  }
  return SinkPayloads[type].parse(known) as SinkPayload<T>;
}

/** The envelope carries its own `ts` (when the event is emitted), distinct from `answered_at`. */
export function buildSinkEnvelope<T extends SinkEventType>(type: T, sessionId: string, payload: SinkPayload<T>, now: Date): SinkEnvelope {
  // The payload was validated when built; the rest is ours, so no second parse on the hot path.
  return { type, ts: now.toISOString(), session_id: sessionId, payload } as SinkEnvelope;
}
