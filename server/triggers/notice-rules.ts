/** The owner's notices about triggers, pure: what a delivery came to, in the instance's language. They name the
 * trigger, delivery, key and actor, never the event's text (that is the model's, as data). */
import { createHash } from "node:crypto";
import { EventBody, type DeliveryRoute } from "../../protocol/events.ts";
import type { TriggerGuard } from "../../protocol/triggers.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { shownName } from "../../common/shown-name.ts";
import type { Say } from "../locales/load.ts";

/** What happened to one delivery, as the owner is told it. */
export type TriggerFact =
  | { kind: "started" | "resumed" | "queued"; sessionId: string; host: string; project: string }
  | { kind: "continued" | "joined"; sessionId: string; commandId: string }
  | { kind: "start_refused"; project: string; reason: string }
  | { kind: "refused"; guard: TriggerGuard; count?: number; until?: string }
  | { kind: "duplicate" }
  | { kind: "unsigned"; address: string };

/** `delivery`: the delivery id, empty for an unsigned request (it has none worth believing). */
export type NoticeSubject = { trigger: string; delivery: string; key: string; event: string; actor: string; url: string | null };

const WARNINGS = new Set<TriggerFact["kind"]>(["start_refused", "refused", "duplicate", "unsigned"]);

export function triggerNotice(subject: NoticeSubject, fact: TriggerFact, now: Date, delivery: DeliveryRoute, say: Say): EventBody {
  const digest = createHash("sha256").update(`${subject.trigger}\0${subject.delivery}\0${fact.kind}\0${now.getTime()}`).digest("hex").slice(0, 32);
  // The actor is the sender's words (the generic route takes any string): one line, controls written out.
  const shown = { ...subject, actor: shownName(subject.actor).text };
  const params = { ...shown, ...fact, guardText: fact.kind === "refused" ? say(`anon-notify.triggers.guards.${fact.guard}`, { ...shown, ...fact }) : "" };
  const sessionId = "sessionId" in fact ? fact.sessionId : `trigger:${subject.trigger}`;
  return EventBody.parse({
    event_id: `trigger:${fact.kind}:${digest}`,
    session_id: sessionId,
    source: say("anon-notify.triggers.source", shown).slice(0, LIMITS.sourceChars),
    task: "",
    status: WARNINGS.has(fact.kind) ? "warning" : "info",
    summary: say(`anon-notify.triggers.${fact.kind}`, params).slice(0, LIMITS.summaryChars),
    details: { trigger: subject.trigger, delivery: subject.delivery, key: subject.key, outcome: fact.kind, ...("guard" in fact ? { guard: fact.guard } : {}) },
    url: subject.url,
    created_at: now.toISOString(),
    delivery,
  });
}
