/**
 * The command channel (protocol 2): claims, leases, ACKs, images and the command summary.
 */
import { z } from "zod";
import { Id, LIMITS, Timestamp } from "./wire.ts";

export const ImageMime = z.enum(["image/png", "image/jpeg", "image/gif", "image/webp"]);
export type ImageMime = z.infer<typeof ImageMime>;
export const CommandImage = z.strictObject({
  mime_type: ImageMime,
  // Raw base64 only: no data: prefix, no URLs.
  data: z.base64(),
});
export type CommandImage = z.infer<typeof CommandImage>;

export const CommandOrigin = z.enum(["anon", "proactive", "operator"]);
export type CommandOrigin = z.infer<typeof CommandOrigin>;
export const CommandState = z.enum(["pending", "leased", "accepted", "cancelled"]);
export type CommandState = z.infer<typeof CommandState>;

export const ClaimQuery = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  capabilities: z.string().max(200).optional(),
  wait_ms: z.coerce.number().int().min(0).max(LIMITS.longPollMaxMs).default(0),
});

export const ClaimedCommand = z.object({
  command_id: Id,
  event_id: Id,
  origin: CommandOrigin,
  instruction: z.string(),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand),
  created_at: Timestamp,
});
export type ClaimedCommand = z.infer<typeof ClaimedCommand>;

export const ClaimAnswer = z.union([
  z.object({ command: z.null() }),
  z.object({ command: ClaimedCommand, lease: z.object({ token: z.string().min(1), expires_at: Timestamp }) }),
]);
export type ClaimAnswer = z.infer<typeof ClaimAnswer>;

export const AckBody = z.strictObject({ session_id: Id, runtime_id: Id, lease_token: z.string().min(1).max(256) });
export const AckAnswer = z.object({ state: z.literal("accepted") });

export const CommandSummary = z.object({
  command_id: Id,
  event_id: Id,
  session_id: Id,
  origin: CommandOrigin,
  state: CommandState,
  cancellable: z.boolean(),
  preview: z.string().max(LIMITS.previewChars),
  image_count: z.number().int().nonnegative(),
  created_at: Timestamp,
  updated_at: Timestamp,
});
export type CommandSummary = z.infer<typeof CommandSummary>;
