/** `--anon-notify-off`: Pi parses arguments before extensions register flags, so `pi -p --anon-notify-off
 * "task"` swallows the task as the flag's value; the extension refuses to load then, and Pi exits 1. */

/** The word Pi's parser took as the value of `--<flag>`, mirroring that parser; undefined when none. */
export function swallowedByFlag(args: readonly string[], flag: string): string | undefined {
  for (let i = 0; i < args.length; i++) {
    const arg = args[i];
    // After `--` every argument is a message.
    if (arg === "--") return undefined;
    if (arg !== `--${flag}`) continue;
    const next = args[i + 1];
    if (next !== undefined && !next.startsWith("-") && !next.startsWith("@")) return next;
  }
  return undefined;
}

const QUOTE_LIMIT = 40;

/** The swallowed prompt as quoted in the refusal (messages.ts `session.swallowedPrompt`): shortened, JSON-quoted. */
export function quotedPrompt(swallowed: string): string {
  return JSON.stringify(swallowed.length > QUOTE_LIMIT ? `${swallowed.slice(0, QUOTE_LIMIT)}…` : swallowed);
}
