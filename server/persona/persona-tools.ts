/** Persona tool calls in the audit trail: who, where, inputs (images as digests) and outcome. */
import { errorText } from "../../common/errors.ts";
import { Id } from "../../protocol/wire.ts";
import type { ToolDefinition } from "./yesimbot-tool-service.ts";
import type { AuditLog } from "../audit/store.ts";

/** A persona tool that records each call and runs as the `persona`. */
export function auditedTool(definition: ToolDefinition, audit: AuditLog): ToolDefinition {
  return {
    ...definition,
    execute: async (args) => {
      let outcome: { status: string; error: unknown } = { status: "exception", error: null };
      try {
        const result = await audit.as("persona", () => definition.execute(args));
        outcome = { status: result.status, error: result.error ?? null };
        return result;
      } catch (error) {
        outcome.error = errorText(error);
        throw error;
      } finally {
        const { session, ...input } = args;
        const sessionId = typeof input.session_id === "string" && Id.safeParse(input.session_id).success ? input.session_id : null;
        await audit.record({
          actor: "persona",
          action: `persona.${definition.name}`,
          session_id: sessionId,
          subject: typeof input.command_id === "string" ? input.command_id : typeof input.event_id === "string" ? input.event_id : null,
          data: {
            input,
            chat: session ? { user_id: session.userId ?? null, channel_id: session.channelId ?? null, direct: session.isDirect } : null,
            ...outcome,
          },
        });
      }
    },
  };
}
