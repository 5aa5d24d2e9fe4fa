/** The operator API: creating, listing and cancelling instructions, stopping a run, listing sessions. */
import { z } from "zod";
import { CommandImage, CommandSummary } from "./queue.ts";
import { SessionProjection } from "./sessions.ts";
import { Id, LIMITS, isStorableText, NOT_STORABLE, Timestamp } from "./wire.ts";

export const OperatorCreateCommand = z.strictObject({
  session_id: Id,
  event_id: Id.optional(),
  instruction: z.string().min(1).max(LIMITS.instructionChars).refine(isStorableText, NOT_STORABLE),
  images: z.array(CommandImage).max(LIMITS.imagesPerCommand).optional(),
  request_key: z.string().min(1).max(512).refine(isStorableText, NOT_STORABLE).optional(),
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
export const SESSION_PAGE_MAX = 200;
/** `next_cursor` of an earlier page: `<last_seen ms>:<session_id>` of its last session. */
export const SessionCursor = z.string().regex(/^\d{1,16}:[A-Za-z0-9._:-]{1,128}$/, "must be the next_cursor of an earlier page");
/** `GET /operator/sessions` (and `agent_sessions`): most recently seen first, one page at a time. */
export const OperatorSessionsQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(SESSION_PAGE_MAX).default(50),
  cursor: SessionCursor.optional(),
});
export type OperatorSessionsQuery = z.infer<typeof OperatorSessionsQuery>;
/** `next_cursor`: pass as `cursor` for the next page; null when this page is the last. */
export const OperatorSessionList = z.object({ sessions: z.array(SessionProjection).max(SESSION_PAGE_MAX), next_cursor: z.string().nullable() });
export type OperatorSessionList = z.infer<typeof OperatorSessionList>;
/** `POST /operator/sessions/{session_id}/stop`: the body is `{}`; 202 with the queued stop. */
export const OperatorStopBody = z.strictObject({});
export const OperatorStopAnswer = z.object({ command: CommandSummary });
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
