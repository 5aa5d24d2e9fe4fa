/** The local desktop sink's payloads; the schemas are the whitelist (unknown keys are stripped) and a missing optional key means unknown, never zero. */
import { z } from "zod";
import { Timestamp } from "./wire.ts";

export const SINK_TEXT_CHARS = 500;
export const SINK_TRUNCATION_MARK = "…";
export const SinkEventType = z.enum(["run.started", "run.completed", "run.failed", "run.cancelled", "tool.started", "tool.completed"]);
export type SinkEventType = z.infer<typeof SinkEventType>;

const SinkText = z.string().max(SINK_TEXT_CHARS + SINK_TRUNCATION_MARK.length);
const SinkSeconds = z.number().nonnegative().finite();
const SinkRunMeta = {
  run_id: z.string().min(1),
  project: z.string().min(1).optional(),
  model: z.string().min(1).optional(),
  agent_name: z.string().min(1).optional(),
};
const SinkToolMeta = { run_id: z.string().min(1), tool_call_id: z.string().min(1), tool: z.string().min(1) };

export const SinkPayloads = {
  "run.started": z.object({ ...SinkRunMeta, prompt: SinkText.optional() }),
  "run.completed": z.object({
    ...SinkRunMeta,
    duration_seconds: SinkSeconds.optional(),
    had_response: z.boolean(),
    answer: SinkText.optional(),
    answered_at: Timestamp.optional(),
  }),
  "run.failed": z.object({ ...SinkRunMeta, duration_seconds: SinkSeconds.optional(), error: SinkText }),
  "run.cancelled": z.object({ ...SinkRunMeta, duration_seconds: SinkSeconds.optional() }),
  "tool.started": z.object(SinkToolMeta),
  "tool.completed": z.object({ ...SinkToolMeta, ok: z.boolean(), duration_seconds: SinkSeconds.optional() }),
} as const;
export type SinkPayload<T extends SinkEventType> = z.infer<(typeof SinkPayloads)[T]>;

const sinkEnvelope = <T extends SinkEventType>(type: T) =>
  z.object({ type: z.literal(type), ts: Timestamp, session_id: z.string().min(1), payload: SinkPayloads[type] });
export const SinkEnvelope = z.discriminatedUnion("type", [
  sinkEnvelope("run.started"),
  sinkEnvelope("run.completed"),
  sinkEnvelope("run.failed"),
  sinkEnvelope("run.cancelled"),
  sinkEnvelope("tool.started"),
  sinkEnvelope("tool.completed"),
]);
export type SinkEnvelope = z.infer<typeof SinkEnvelope>;
