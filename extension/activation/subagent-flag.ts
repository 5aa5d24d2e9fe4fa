/**
 * `--anon-notify-off` on Pi's command line. Pi parses its arguments before any extension has
 * registered a flag, so it cannot know this one is boolean: an unknown `--name` followed by a word
 * that starts with neither `-` nor `@` takes that word as its value, and the boolean flag then
 * drops the value. `pi -p --anon-notify-off "task"` therefore runs no task at all. The extension
 * cannot give the prompt back; it refuses to load instead, which makes Pi exit 1 before any run.
 */

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
