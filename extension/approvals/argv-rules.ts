/** The literal argv a request carries for the server's grant binding, only when the analysis resolved
 * every simple command. */
import type { Analysis } from "./command-rules.ts";
import { COMMAND_KINDS } from "./safe-rules.ts";
import type { Script } from "./shell-rules.ts";

/**
 * The literal words of every simple command, in order: only when everything was resolved (no
 * expansion, assignment, redirection to a file, construct beyond lists and pipelines, nor a command
 * that runs another — a wrapper, `sh -c`, `find -exec` — whose words would not say what runs).
 */
export function literalArgv(analysis: Analysis): string[][] | undefined {
  const script: Script | undefined = analysis.script;
  if (
    !script ||
    analysis.opaque.size > 0 ||
    analysis.runs.length !== script.commands.length ||
    script.writes.length > 0 ||
    script.assignments.length > 0 ||
    script.definitions.size > 0
  )
    return undefined;
  if ([...script.kinds].some((kind) => !ARGV_KINDS.has(kind))) return undefined;
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
