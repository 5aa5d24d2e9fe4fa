/** How the chat and the console page word an approval's action in their own language. Free of zod, so the console page bundles it too. */
import type { ApprovalSource, BuiltinRuleId } from "../protocol/approvals.ts";

/** Built-in rules whose label is their command's own words: the same in every language. */
export const COMMAND_ACTION_WORDS: Readonly<Partial<Record<BuiltinRuleId, string>>> = {
  "rm-rf": "rm -rf",
  sudo: "sudo",
  "git-push-force": "git push --force",
  "git-reset-hard": "git reset --hard",
  "git-clean": "git clean -f",
};
/** Every command-word rule among `rules`, in order: a call that matched `rm-rf` and `sudo` is `rm -rf + sudo`. */
export function commandWords(rules: readonly string[]): string | undefined {
  const words = [...new Set(rules)].flatMap((rule) => (Object.hasOwn(COMMAND_ACTION_WORDS, rule) ? [COMMAND_ACTION_WORDS[rule as BuiltinRuleId]!] : []));
  return words.length > 0 ? words.join(" + ") : undefined;
}

/** Actions each side words in its own language. */
export const WORDED_ACTIONS = ["opaque", "disk-write", "write-outside-project"] as const;
export type WordedAction = (typeof WORDED_ACTIONS)[number];
/** A user rule: `action` is its label (or id), the user's own words. */
export const USER_RULE_ACTION = "rule";

/** How a side shows an approval's action. `model`/`agent`: the agent's words, never passed off as the side's own. */
export type ActionLabel =
  | { kind: "words"; words: string }
  | { kind: "worded"; code: WordedAction }
  | { kind: "rule"; label: string }
  | { kind: "model"; text: string }
  | { kind: "agent"; text: string }
  | { kind: "unknown" };

/** `ask_approval` is always the model's words, whatever code came with it; a `policy` request without a code (an older client) shows its text as the
 * agent's label; an unknown code shows no label at all (fail closed: the command itself says what runs). */
export function actionLabel(approval: {
  source: ApprovalSource;
  action: string;
  action_code?: string | null | undefined;
  rules?: readonly string[];
}): ActionLabel {
  if (approval.source === "ask_approval") return { kind: "model", text: approval.action };
  const code = approval.action_code;
  if (code === undefined || code === null) return { kind: "agent", text: approval.action };
  const words = Object.hasOwn(COMMAND_ACTION_WORDS, code) ? COMMAND_ACTION_WORDS[code as BuiltinRuleId] : undefined;
  if (words !== undefined) return { kind: "words", words: commandWords([code, ...(approval.rules ?? [])]) ?? words };
  if ((WORDED_ACTIONS as readonly string[]).includes(code)) return { kind: "worded", code: code as WordedAction };
  if (code === USER_RULE_ACTION) return { kind: "rule", label: approval.action };
  return { kind: "unknown" };
}
