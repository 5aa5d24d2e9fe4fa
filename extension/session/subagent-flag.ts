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

export function swallowedPromptMessage(flag: string, swallowed: string, envName: string): string {
  const quoted = JSON.stringify(swallowed.length > QUOTE_LIMIT ? `${swallowed.slice(0, QUOTE_LIMIT)}…` : swallowed);
  return [
    `--${flag} 不带值，但 Pi 解析参数时把紧随其后的 ${quoted} 当成了它的值，这段提示词不会执行。` +
      `请把 --${flag} 放在提示词之后（pi -p "任务" --${flag}），或在提示词前加 --（pi -p --${flag} -- "任务"），或改用环境变量 ${envName}=1。`,
    `--${flag} takes no value, but Pi's argument parser took the ${quoted} after it as its value, so that prompt would never run. ` +
      `Put --${flag} after the prompt (pi -p "task" --${flag}), end the options with -- (pi -p --${flag} -- "task"), or set ${envName}=1 instead.`,
  ].join("\n");
}
