/** The governed `report_progress` tool: its stages and the record of a refused call. */
import { z } from "zod";
import { Details, Id, Timestamp } from "./wire.ts";

export const ProgressStage = z.enum(["started", "progress", "blocked", "awaiting_approval", "done", "failed"]);
export type ProgressStage = z.infer<typeof ProgressStage>;
export const ProgressSeverity = z.enum(["info", "warn", "critical"]);
export type ProgressSeverity = z.infer<typeof ProgressSeverity>;

/** `POST /audit/tool-calls`: the extension's record of one call of its model-callable tool that was
 * refused (a sent call is audited through its event). `input` is the model's arguments as given. */
export const ToolCallRecord = z.strictObject({
  session_id: Id,
  runtime_id: Id,
  tool: z.literal("report_progress"),
  tool_call_id: Id,
  decision: z.enum(["sent", "refused"]),
  reason: z.string().max(200).nullable(),
  event_id: Id.nullable(),
  input: Details,
  created_at: Timestamp,
});
export type ToolCallRecord = z.infer<typeof ToolCallRecord>;
export const ToolCallRecorded = z.object({ recorded: z.literal(true) });
export type ToolCallRecorded = z.infer<typeof ToolCallRecorded>;
