/**
 * The operator API: creating, listing and cancelling instructions, listing sessions.
 */
import { z } from "zod";
import { CommandImage, CommandSummary } from "./commands.ts";
import { SessionProjection } from "./sessions.ts";
import { Id, LIMITS, Timestamp } from "./wire.ts";

export const OperatorCreateCommand = z.strictObject({
  session_id: Id,
  event_id: Id.optional(),
  instruction: z.string().min(1).max(LIMITS.instructionChars),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand).optional(),
  request_key: z.string().min(1).max(512).optional(),
});
export type OperatorCreateCommand = z.infer<typeof OperatorCreateCommand>;

export const OperatorCancelBody = z.strictObject({ session_id: Id });
export const OperatorListQuery = z.strictObject({
  session_id: Id,
  limit: z.coerce.number().int().min(1).max(LIMITS.commandListMax).default(20),
});

/** `POST /operator/commands`: 201 for a new command, 200 with `duplicate: true` for a repeated request key. */
export const OperatorCommandCreated = z.object({ command: CommandSummary, duplicate: z.boolean() });
export type OperatorCommandCreated = z.infer<typeof OperatorCommandCreated>;
export const OperatorCommandList = z.object({ commands: z.array(CommandSummary).max(LIMITS.commandListMax) });
export const OperatorSessionList = z.object({ sessions: z.array(SessionProjection) });
export const CancelAnswer = z.object({ state: z.literal("cancelled") });

/** `POST /operator/mute`: mute one session, or all without `session_id`, for `minutes` (default 60). */
export const MuteBody = z.strictObject({
  session_id: Id.optional(),
  minutes: z.number().int().min(1).max(LIMITS.muteMaxMinutes).optional(),
});
/** `DELETE /operator/mute`: end one session's mute, or every mute without `session_id`. */
export const UnmuteBody = z.strictObject({ session_id: Id.optional() });
/** A running mute: of one session, or of all (`session_id` null). */
export const MuteEntry = z.object({ session_id: Id.nullable(), until: Timestamp });
export type MuteEntry = z.infer<typeof MuteEntry>;
export const MuteSet = z.object({ mute: MuteEntry });
export const MuteEnded = z.object({ ended: z.number().int().nonnegative() });
export const MuteList = z.object({ mutes: z.array(MuteEntry) });
