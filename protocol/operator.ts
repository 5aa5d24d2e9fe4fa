/**
 * The operator API: creating, listing and cancelling instructions, stopping a run, listing sessions.
 */
import { z } from "zod";
import { CommandImage, CommandSummary } from "./commands.ts";
import { SessionProjection } from "./sessions.ts";
import { Id, LIMITS } from "./wire.ts";

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
/** `POST /operator/sessions/{session_id}/stop`: the body is `{}`; 202 with the queued stop. */
export const OperatorStopBody = z.strictObject({});
export const OperatorStopAnswer = z.object({ command: CommandSummary });
export const CancelAnswer = z.object({ state: z.literal("cancelled") });
