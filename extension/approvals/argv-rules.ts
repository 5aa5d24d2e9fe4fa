/** The literal argv a request carries for the server's grant binding: only when nothing expands, is assigned, redirected to a file
 * or defined, no construct goes beyond lists and pipelines, and no command runs another (a wrapper, `sh -c`, `find -exec`). */
import type { Analysis } from "./command-rules.ts";
import { COMMAND_KINDS } from "./safe-rules.ts";

export function literalArgv(analysis: Analysis): string[][] | undefined {
  const { script } = analysis;
  if (
    !script ||
    analysis.opaque.size > 0 ||
    analysis.runs.length !== script.commands.length ||
    script.writes.length > 0 ||
    script.assignments.length > 0 ||
    script.definitions.size > 0 ||
    [...script.kinds].some((kind) => !ARGV_KINDS.has(kind))
  )
    return undefined;
  const argv: string[][] = [];
  for (const command of script.commands) {
    if (command.words.length === 0 || command.stdin.kind === "inline" || command.stdin.kind === "file") return undefined;
    const words = command.words.map((word) => word.value);
    if (words.some((word) => word === undefined)) return undefined;
    argv.push(words as string[]);
  }
  return argv.length > 0 ? argv : undefined;
}

const ARGV_KINDS = new Set(COMMAND_KINDS);
