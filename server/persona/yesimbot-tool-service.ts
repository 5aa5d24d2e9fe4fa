/** The shapes of YesImBot v3's tool service this package relies on, duck-typed (not installable here). */
import type { Schema as SchemaType, Session } from "koishi";

export type ToolCallResult = { status: "success" | "error"; result?: unknown; error?: { name: string; message: string; retryable?: boolean } };

/** YesImBot v3's `ToolDefinition`; it calls `execute({ session, ...params })`. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: SchemaType;
  isSupported?: (session: Session) => boolean;
  execute: (args: { session?: Session } & Record<string, unknown>) => Promise<ToolCallResult>;
}

declare module "koishi" {
  interface Context {
    /** The part of YesImBot v3's `ToolService` the persona tools use. */
    "yesimbot.tool": { registerTool(definition: ToolDefinition): void; unregisterTool(name: string): boolean };
  }
}
