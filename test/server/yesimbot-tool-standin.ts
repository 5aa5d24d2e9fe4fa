/**
 * A stand-in for YesImBot v3's tool service (`yesimbot.tool`) that keeps the operator-rule tests
 * of the persona tools fast. It behaves as koishi-plugin-yesimbot@3.0.3's ToolService does
 * (services/extension/service.ts): `registerTool`, `unregisterTool`, and `invoke`, which skips
 * `isSupported(session)` without a session, validates the params with the tool's Schema (unknown
 * keys kept), calls `execute({ session, ...params })` and retries while the error is `retryable`.
 * The real service runs in test/persona/yesimbot-real.test.ts.
 */
import type { Context, Session } from "koishi";
import { koishi } from "../../server/koishi.ts";
import type { ToolCallResult, ToolDefinition } from "../../server/persona/yesimbot-tool-service.ts";

export const STANDIN_MAX_RETRY = 2;

export class StandInToolService extends koishi.Service {
  readonly tools = new Map<string, ToolDefinition>();

  constructor(ctx: Context) {
    super(ctx, "yesimbot.tool", true);
  }

  registerTool(definition: ToolDefinition): void {
    this.tools.set(definition.name, definition);
  }

  unregisterTool(name: string): boolean {
    return this.tools.delete(name);
  }

  getTool(name: string, session?: Session): ToolDefinition | undefined {
    const tool = this.tools.get(name);
    if (!tool || (session && tool.isSupported && !tool.isSupported(session))) return undefined;
    return tool;
  }

  async invoke(name: string, params: Record<string, unknown>, session?: Session): Promise<ToolCallResult> {
    const tool = this.getTool(name, session);
    if (!tool) return failed(`Tool ${name} not found or not supported in this context.`);
    let validated = params;
    try {
      validated = tool.parameters(params);
    } catch (error) {
      return failed(`Parameter validation failed: ${(error as Error).message}`);
    }
    let last = failed("Tool call did not execute.");
    for (let attempt = 1; attempt <= STANDIN_MAX_RETRY + 1; attempt++) {
      try {
        last = (await tool.execute({ session, ...validated })) || failed("Tool call did not execute.");
      } catch (error) {
        return failed(`Exception: ${(error as Error).message}`);
      }
      if (last.status === "success" || !last.error?.retryable) return last;
    }
    return last;
  }
}

function failed(message: string): ToolCallResult {
  return { status: "error", error: { name: "ToolError", message } };
}
