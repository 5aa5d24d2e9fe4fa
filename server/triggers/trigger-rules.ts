/** The triggers' decisions, pure: is a body signed, what a GitHub payload says, which guard refuses a
 * delivery, what a key's next delivery does to its session, and the prompt the model reads. */
import { createHmac, timingSafeEqual } from "node:crypto";
import { LIMITS } from "../../protocol/wire.ts";
import { TriggerDelivery, type TriggerGuard } from "../../protocol/triggers.ts";
import { markedBlock } from "../persona/block-rules.ts";
import type { TriggerConfig } from "./config-rules.ts";

/** Whether `header` is `sha256=<hex>` of the HMAC-SHA256 of the raw bytes, compared in constant time. */
export function signatureMatches(secret: string, raw: Buffer, header: string | undefined): boolean {
  const expected = createHmac("sha256", secret).update(raw).digest();
  const match = /^sha256=([0-9a-fA-F]{64})$/.exec(header?.trim() ?? "");
  const given = match ? Buffer.from(match[1]!, "hex") : Buffer.alloc(expected.length);
  return timingSafeEqual(given, expected) && match !== null;
}

type Json = Record<string, unknown>;
const record = (value: unknown): Json => (value && typeof value === "object" && !Array.isArray(value) ? (value as Json) : {});
const text = (value: unknown) => (typeof value === "string" ? value : null);

/** A GitHub payload in the delivery shape (docs/protocol.md, Triggers); zod says what is missing. */
export function fromGitHub(event: string, payload: unknown) {
  const body = record(payload);
  const item = record(body.pull_request ?? body.issue);
  const sender = record(body.sender);
  const comment = event === "issue_comment" ? record(body.comment) : null;
  const labels = Array.isArray(item.labels) ? item.labels.map((label) => text(record(label).name)).filter((name) => name !== null) : [];
  return TriggerDelivery.safeParse({
    event,
    action: text(body.action),
    repository: record(body.repository).full_name,
    number: typeof item.number === "number" ? item.number : null,
    actor: sender.login,
    actor_type: sender.type === "Bot" ? "Bot" : "User",
    title: text(item.title),
    // A comment carries its own text only: the item's body is the author's, not the commenter's.
    body: comment ? null : text(item.body),
    comment: comment ? text(comment.body) : null,
    labels,
    label: text(record(body.label).name),
    url: text(comment?.html_url) ?? text(item.html_url),
  });
}

/** One session per repository and PR or issue number. */
export function keyOf(delivery: TriggerDelivery): string {
  return delivery.number === null ? delivery.repository : `${delivery.repository}#${delivery.number}`;
}

const same = (a: string, b: string) => a.toLowerCase() === b.toLowerCase();

export function projectFor(trigger: TriggerConfig, repository: string) {
  return trigger.projects.find((p) => same(p.repository, repository));
}

/** The first allowlist or loop guard that refuses the delivery, or null; needs no stored state. */
export function admit(delivery: TriggerDelivery, trigger: TriggerConfig): TriggerGuard | null {
  if (!projectFor(trigger, delivery.repository)) return "repository";
  const named = delivery.action === null ? [delivery.event] : [delivery.event, `${delivery.event}.${delivery.action}`];
  if (!trigger.events.some((event) => named.includes(event))) return "event";
  if (delivery.actor_type === "Bot" || trigger.bots.some((bot) => same(bot, delivery.actor))) return "bot";
  if ([delivery.title, delivery.body, delivery.comment].some((t) => t?.includes(trigger.marker))) return "marker";
  if (!trigger.actors.some((actor) => actor === "*" || same(actor, delivery.actor))) return "actor";
  const carried = delivery.action === "labeled" && delivery.label !== null ? [delivery.label] : delivery.labels;
  if (trigger.labels.length > 0 && !carried.some((label) => trigger.labels.includes(label))) return "label";
  return null;
}

/** What the stored deliveries say about the limits at this moment; `trippedAt`: when the breaker last tripped within the last hour. */
type RunCounts = { trippedAt: Date | null; keyRunsLastHour: number; runsLastDay: number };

export const BREAKER_PAUSE_MS = 60 * 60_000;

export function limitGuard(counts: RunCounts, trigger: TriggerConfig): TriggerGuard | null {
  if (counts.trippedAt !== null) return "paused";
  if (counts.keyRunsLastHour >= trigger.runsPerKeyPerHour) return "breaker";
  if (counts.runsLastDay >= trigger.runsPerDay) return "daily_limit";
  return null;
}

/** What the owner reads beside a limit's refusal: the count that refused it, and until when the trigger is paused. */
export function refusalCounts(guard: TriggerGuard, counts: RunCounts | undefined, now: Date): { count?: number; until?: string } {
  if (guard === "paused" && counts?.trippedAt) return { until: new Date(counts.trippedAt.getTime() + BREAKER_PAUSE_MS).toISOString() };
  if (guard === "breaker" && counts) return { count: counts.keyRunsLastHour, until: new Date(now.getTime() + BREAKER_PAUSE_MS).toISOString() };
  if (guard === "daily_limit" && counts) return { count: counts.runsLastDay };
  return {};
}

/** What is known of a key's session: its start job's state, and whether it runs now. */
export type KeySession = { sessionId: string; host: string; project: string; start: "pending" | "started" | "refused"; online: boolean };

/** One session per key: continued while it runs or starts, resumed once it ended, a new one after a refused start. */
export function planFor(
  session: KeySession | undefined,
): { kind: "start" } | { kind: "instruct"; sessionId: string; joined: boolean } | { kind: "resume"; session: KeySession } {
  if (!session || (session.start === "refused" && !session.online)) return { kind: "start" };
  if (session.online) return { kind: "instruct", sessionId: session.sessionId, joined: false };
  if (session.start === "pending") return { kind: "instruct", sessionId: session.sessionId, joined: true };
  return { kind: "resume", session };
}

// Each cut text ends with `…`: the model sees that it read part of it.
const cut = (value: string | null, max: number) => (value === null || value.length <= max ? value : `${value.slice(0, Math.max(0, max - 1))}…`);
/** Text budgets tried in turn until the prompt fits `instructionChars`; the last one always fits (ids and names only). */
const BUDGETS = [2000, 1000, 400, 100, 0];

/** The trigger's prompt around the delivery as marked data, within the instruction limit. */
export function triggerPrompt(trigger: TriggerConfig, deliveryId: string, delivery: TriggerDelivery): string {
  const around = trigger.prompt.split("{marker}").join(trigger.marker);
  for (const budget of BUDGETS) {
    const labels = delivery.labels.slice(0, Math.floor(budget / 50)).map((label) => cut(label, 50));
    const block = markedBlock({
      trigger: trigger.name,
      delivery: deliveryId,
      event: delivery.action === null ? delivery.event : `${delivery.event}.${delivery.action}`,
      repository: delivery.repository,
      number: delivery.number,
      actor: delivery.actor,
      title: cut(delivery.title, Math.min(budget, 300)),
      body: cut(delivery.body, budget),
      comment: cut(delivery.comment, budget),
      labels,
      url: budget > 0 ? delivery.url : null,
    });
    const prompt = around.includes("{event}") ? around.split("{event}").join(block) : `${around}\n\n${block}`;
    if (prompt.length <= LIMITS.instructionChars) return prompt;
  }
  throw new Error("a trigger prompt does not fit even without the event's texts");
}
