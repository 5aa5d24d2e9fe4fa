/** What every notice of one session shares, sampled from Pi when the notice is made. */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { renderSource } from "../config/config.ts";
import type { Config } from "../config/schema-rules.ts";
import type { Messages } from "../texts/messages.ts";
import { modelLabel, projectName } from "../session/label-rules.ts";
import { sampleContextUsage, type NoticeContext, type PiContextUsage } from "./notice-rules.ts";

/** Reads from Pi now what a notice says as of this moment (the context usage, the model and mode,
 * the time) and returns the builder of the rest (the rendered source line, the checked usage): a
 * Pi handler pays only for the reads, and the building runs after it, off Pi's turn. */
export function sampleNoticeContext(ctx: ExtensionContext, sessionId: string, runtimeId: string, config: Config, m: Messages): () => NoticeContext {
  let readUsage: () => PiContextUsage | undefined;
  try {
    const usage = ctx.getContextUsage();
    readUsage = () => usage;
  } catch (error) {
    readUsage = () => {
      throw error;
    };
  }
  const { cwd, mode } = ctx;
  const model = modelLabel(ctx.model);
  const now = new Date();
  return () => {
    const project = projectName(cwd);
    return {
      sessionId,
      runtimeId,
      project,
      source: renderSource(config.source, { project, cwd, sessionId, model, mode }),
      content: config.content,
      contextUsage: sampleContextUsage(readUsage),
      now,
      text: m.notice,
    };
  };
}
