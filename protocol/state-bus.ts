/** The extension's two EventBus contracts: the `anon-notify:state` v1 payload and `anon-notify:send` requests. */
import { z } from "zod";
import { DeliveryRoute } from "./events.ts";
import { Id } from "./wire.ts";

export const STATE_CHANNEL = "anon-notify:state";
export const SEND_CHANNEL = "anon-notify:send";
export const STATUS_KEY = "anon-notify";

/** `disabled`: the global `enabled` switch is off. `misconfigured`: the configuration is invalid.
 * `suppressed`: a subagent, which never notifies whatever its record says. */
export const SessionStatus = z.enum(["inactive", "active", "suppressed", "disabled", "misconfigured"]);
export type SessionStatus = z.infer<typeof SessionStatus>;

/** Stable enums and booleans only: never a token, a QQ number, an endpoint or display text. */
export const StatePayload = z.strictObject({
  version: z.literal(1),
  sessionId: z.string().min(1),
  status: SessionStatus,
  sessionActive: z.boolean(),
  servicesEnabled: z.boolean(),
  tokenConfigured: z.boolean(),
});
export type StatePayload = z.infer<typeof StatePayload>;

export type SessionFacts = { sessionActive: boolean; subagent: boolean; config: "valid" | "disabled" | "invalid" };

export function sessionStatus(facts: SessionFacts): SessionStatus {
  if (facts.subagent) return "suppressed";
  if (facts.config === "invalid") return "misconfigured";
  if (facts.config === "disabled") return "disabled";
  return facts.sessionActive ? "active" : "inactive";
}

/** Notices flow, and later heartbeats and command polling run, only in this state. */
export function servicesEnabled(facts: SessionFacts): boolean {
  return sessionStatus(facts) === "active";
}

/** What another extension may send. Text longer than the wire limits is cut like the extension's own notices; wrong types and unknown keys are rejected. */
export const SendRequest = z.strictObject({
  status: z.enum(["completed", "failed", "warning", "info"]),
  summary: z.string().min(1),
  source: z.string().min(1).optional(),
  task: z.string().optional(),
  // Scoped to the session on the wire, so it must leave room inside the 128-character id.
  eventId: Id.max(80).optional(),
  details: z.record(z.string(), z.unknown()).optional(),
  url: z.url({ protocol: /^https?$/ }).optional(),
  delivery: DeliveryRoute.optional(),
});
export type SendRequest = z.infer<typeof SendRequest>;
