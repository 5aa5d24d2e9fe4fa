/** Where each rule of an approval matched, for each side (chat, console) to word in its language. Pure, so the console page bundles it. */

/** A rule, with the 1-based line and column where its match first stands in the command, or the match itself when it is not there as written. */
export type RuleSite = { rule: string; line?: number; col?: number; at?: string };

export function ruleSites(rules: readonly string[], matched: readonly { rule: string; at: string }[] | null, command: string): RuleSite[] {
  return rules.map((rule) => {
    const at = matched?.find((site) => site.rule === rule)?.at;
    if (!at) return { rule };
    const index = command.indexOf(at);
    if (index < 0) return { rule, at };
    const before = command.slice(0, index);
    return { rule, line: before.split("\n").length, col: index - before.lastIndexOf("\n") };
  });
}
