/** The owner's words as typed: Koishi runs `$(…)` and reads a leading `-` as an option before a command
 * sees its arguments, so free text is read from the message's own source. */
import type { Argv } from "koishi";
import { koishi } from "../koishi.ts";

/** The text after the command's name and `leading` (its arguments as Koishi parsed them), attached elements left out,
 * trimmed; `parsed` when `argv` is not the message's own or its source does not start so (a quoted argument, a native command). */
export function typedTail(argv: Argv, leading: readonly (string | undefined)[], parsed: string | undefined): string {
  const fallback = (parsed ?? "").trim();
  const session = argv.session;
  // What Koishi parsed the command from (Koishi's own `argv.source` is empty for a message without a rest).
  const source = session?.argv === argv ? session.stripped.content.slice((session.stripped.prefix ?? "").length) : undefined;
  const name = source ? /^\S+/.exec(source) : null;
  if (!source || !name) return fallback;
  let rest = source.slice(name[0].length);
  for (const argument of leading) {
    const token = /^\s+(\S+)/.exec(rest);
    if (!token || argument === undefined || koishi.h.unescape(token[1]!) !== argument) return fallback;
    rest = rest.slice(token[0].length);
  }
  if (rest && !/^\s/.test(rest)) return fallback;
  return koishi.h("", koishi.h.parse(rest)).toString(true).trim();
}
