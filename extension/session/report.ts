/** Telling the user something: the session's UI when it has one, stderr otherwise, never throwing into Pi. */
import type { ExtensionCommandContext, ExtensionContext } from "@earendil-works/pi-coding-agent";

export type ReportLevel = "info" | "warning" | "error";
export type Report = (message: string, level?: ReportLevel) => void;

/** A command's answer: the UI when there is one; else stderr, since Pi keeps stdout for the answer in print and JSON modes. */
export function show(ctx: ExtensionCommandContext, text: string, level: ReportLevel = "info"): void {
  if (ctx.hasUI) return ctx.ui.notify(text, level);
  process.stderr.write(`${text}\n`);
}

export function createReporter() {
  let bound: ExtensionContext | undefined;
  return {
    report(message: string, level: ReportLevel = "warning"): void {
      try {
        if (bound?.hasUI) return bound.ui.notify(message, level);
      } catch {
        // A stale ctx after replacement; stderr still reaches the user.
      }
      if (level !== "info") process.stderr.write(`[anon-notify] ${message}\n`);
    },
    /** Set first at session_start, so problems found while starting reach the user's UI too. */
    bind(ctx: ExtensionContext) {
      bound = ctx;
    },
  };
}
