/**
 * For tests that a text reads in one language: what in it belongs to the other, once the agent's
 * own text (commands), codes and names are taken out.
 */
export type Language = "zh-CN" | "en-US";

/** Latin words a Chinese approval text may hold: names and the commands it tells you to type, never prose. */
const NAMES = new Set(["Pi", "Agent", "bash", "anon", "approve", "deny", "approval", "yes", "no"]);

/**
 * The other language's words in `text`: Chinese in an English text; Latin words but names in a
 * Chinese one. Lines behind `┃ ` (the command as the chat shows it), the `verbatim` strings
 * (codes, project, the command as the page shows it), rule ids and named control characters (`\t`)
 * are not counted.
 */
export function otherLanguage(text: string, language: Language, verbatim: readonly string[]): string[] {
  let ours = text
    .split("\n")
    .filter((line) => !line.startsWith("┃ "))
    .join("\n");
  for (const part of verbatim) ours = ours.replaceAll(part, " ");
  ours = ours.replace(/[a-z0-9]+([.-][a-z0-9]+)+/g, " ").replace(/\\[a-z]/g, " ");
  if (language === "en-US") return ours.match(/[\p{Script=Han}\u3000-\u303f\uff00-\uffef]+/gu) ?? [];
  return (ours.match(/[A-Za-z]+/g) ?? []).filter((word) => !NAMES.has(word));
}

/** The approval rules whose action has no command words of its own: a command that matches each, and the words for its action. */
export const RULE_ONLY_CASES = [
  { rule: "disk-write", command: "wipefs --version", "en-US": "write to a disk device", "zh-CN": "写磁盘设备" },
  { rule: "write-outside-project", command: "echo hi > ~/anon-notify-language-check.txt", "en-US": "write outside the project", "zh-CN": "写入项目外" },
  { rule: "opaque.eval", command: 'eval "$ANON_NOTIFY_NOTHING"', "en-US": "cannot see what will run", "zh-CN": "看不清将运行什么" },
] as const;

const UNKNOWN = ["一项需要批准的操作", "an action that needs approval"] as const;

/**
 * An approval's action as each side words it, whichever catalogue (the server's locale files, the
 * page's messages): action, action_code, source → the action in zh-CN and en-US.
 */
export const ACTION_LABEL_CASES: readonly [string, string | null, "policy" | "ask_approval", string, string][] = [
  ["看不清将运行什么", "opaque", "policy", "看不清将运行什么", "cannot see what will run"],
  ["write to a disk device", "disk-write", "policy", "写磁盘设备", "write to a disk device"],
  ["写入项目外", "write-outside-project", "policy", "写入项目外", "write outside the project"],
  ["写", "rm-rf", "policy", "rm -rf", "rm -rf"],
  ["x", "git-push-force", "policy", "git push --force", "git push --force"],
  ["kubectl 部署", "rule", "policy", "你的规则「kubectl 部署」", "your rule “kubectl 部署”"],
  // An older client: its label, in whatever language, is the agent's words.
  ["写磁盘设备", null, "policy", "Agent 自己的说法「写磁盘设备」", "in the agent's own words: “写磁盘设备”"],
  // Codes no side knows, or that would reach other texts or the prototype, name nothing.
  ["ls only", "ok", "policy", ...UNKNOWN],
  ["ls only", "request.approve", "policy", ...UNKNOWN],
  ["ls only", "approvalWants", "policy", ...UNKNOWN],
  ["ls only", "constructor", "policy", ...UNKNOWN],
  ["ls only", "__proto__", "policy", ...UNKNOWN],
  // The model's words, whatever code came with them, on one line.
  ["deploy\nanon.approve XXXXX", "opaque", "ask_approval", "deploy⏎anon.approve XXXXX", "deploy⏎anon.approve XXXXX"],
];
