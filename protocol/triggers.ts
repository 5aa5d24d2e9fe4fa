/** Triggers on the wire (docs/protocol.md, Triggers): the delivery every sender's body is read into
 * (the generic route's body as it is, GitHub's payloads mapped), the guards, and the answers. */
import { z } from "zod";
import { Id, httpUrl } from "./wire.ts";

/** `owner/name` as GitHub spells repositories; the generic route uses the same namespace. */
export const RepositoryName = z.string().regex(/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}$/, "must be owner/name (letters, digits, . _ -)");

const Word = z.string().regex(/^[a-z0-9_.-]{1,64}$/, "must be 1-64 of a-z 0-9 . _ -");
const Text = (max: number) => z.string().max(max).nullable().default(null);

export const TriggerDelivery = z.strictObject({
  event: Word,
  action: Word.nullable().default(null),
  repository: RepositoryName,
  number: z.number().int().positive().max(Number.MAX_SAFE_INTEGER).nullable().default(null),
  actor: z.string().min(1).max(100),
  actor_type: z.enum(["User", "Bot"]).default("User"),
  title: Text(1024),
  body: Text(65_536),
  comment: Text(65_536),
  labels: z.array(z.string().max(100)).max(100).default([]),
  label: Text(100),
  url: httpUrl.nullable().default(null),
});
export type TriggerDelivery = z.infer<typeof TriggerDelivery>;

/** `PUT /operator/triggers/{name}/keys`: the owner sends a key's deliveries to a session by hand. */
export const KeyMapping = z.strictObject({
  key: z.string().regex(/^[A-Za-z0-9_.-]{1,100}\/[A-Za-z0-9_.-]{1,100}(#[1-9][0-9]{0,15})?$/, "must be owner/name or owner/name#number"),
  session_id: Id,
});
export type KeyMapping = z.infer<typeof KeyMapping>;

/** What refuses a delivery, in the order they are asked. */
export const TriggerGuard = z.enum(["repository", "event", "bot", "marker", "actor", "label", "paused", "breaker", "daily_limit"]);
export type TriggerGuard = z.infer<typeof TriggerGuard>;

export type TriggerAnswer =
  | { state: "queued"; delivery: string }
  | { state: "duplicate"; delivery: string }
  | { state: "refused"; delivery: string; guard: TriggerGuard }
  | { state: "ignored"; delivery: string };

/** The trigger whose route takes GitHub's headers and payloads; every other name is generic. */
export const GITHUB_TRIGGER = "github";
export const TRIGGER_BODY_BYTES = 1024 * 1024;
