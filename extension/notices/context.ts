/**
 * What every notice of one session shares, sampled from Pi when a notice is built: the session and
 * runtime ids, the project, the rendered source line, the context usage and the session's words.
 */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { renderSource } from "../config/config.ts";
import type { Config } from "../config/schema.ts";
import type { Messages } from "../messages.ts";
import { modelLabel, projectName } from "../session-labels.ts";
import { sampleContextUsage, type NoticeContext } from "./notice.ts";

export function noticeContext(ctx: ExtensionContext, sessionId: string, runtimeId: string, config: Config, m: Messages): NoticeContext {
  const project = projectName(ctx.cwd);
  return {
    sessionId,
    runtimeId,
    project,
    source: renderSource(config.source, { project, cwd: ctx.cwd, sessionId, model: modelLabel(ctx.model), mode: ctx.mode }),
    content: config.content,
    contextUsage: sampleContextUsage(() => ctx.getContextUsage()),
    now: new Date(),
    text: m.notice,
  };
}
