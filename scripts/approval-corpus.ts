/**
 * How many of an everyday coding session's bash calls (test/fixtures/everyday-session.txt) would
 * ask a person: strict mode with an empty allow list, strict with a typical one, and rules mode.
 *   npx node scripts/approval-corpus.ts [--list]
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { matchCall, type PolicySettings } from "../extension/approvals/policy-rules.ts";
import { loadShell } from "../extension/approvals/shell-rules.ts";
import { messagesFor } from "../extension/texts/messages.ts";

export const CORPUS_FILE = join(import.meta.dirname, "..", "test", "fixtures", "everyday-session.txt");

/** `npm test`, `npm run …`, `git add/commit/push` to a remote branch, `python3 -m pytest`, `make`. */
export const TYPICAL_ALLOW: readonly (readonly string[])[] = [
  ["npm", "test"],
  ["npm", "run"],
  ["git", "add"],
  ["git", "commit"],
  ["git", "push", "origin"],
  ["git", "push", "-u", "origin"],
  ["python3", "-m", "pytest"],
  ["make"],
];

const base: PolicySettings = { mode: "strict", allow: [], disabledRules: [], rules: [], grantableRules: [] };
export const CORPUS_SETTINGS = {
  "strict, empty allow list": base,
  "strict, typical allow list": { ...base, allow: TYPICAL_ALLOW },
  rules: { ...base, mode: "rules" },
} satisfies Record<string, PolicySettings>;

export const corpusCommands = (): string[] =>
  readFileSync(CORPUS_FILE, "utf8")
    .split("\n")
    .filter((line) => line.trim() !== "" && !line.startsWith("#"));

/** For each setting, the commands of the corpus that would ask. */
export async function corpusAsks(): Promise<Record<keyof typeof CORPUS_SETTINGS, string[]>> {
  const read = await loadShell();
  const words = messagesFor("en-US").approvals.actions;
  const place = { cwd: "/home/dev/project", home: "/home/dev", tempDirs: ["/tmp"] };
  const commands = corpusCommands();
  const asks = (settings: PolicySettings) =>
    commands.filter((command) => matchCall({ tool: "bash", input: { command } }, place, settings, read, words) !== undefined);
  return {
    "strict, empty allow list": asks(CORPUS_SETTINGS["strict, empty allow list"]),
    "strict, typical allow list": asks(CORPUS_SETTINGS["strict, typical allow list"]),
    rules: asks(CORPUS_SETTINGS.rules),
  };
}

if (import.meta.main) {
  const total = corpusCommands().length;
  const asks = await corpusAsks();
  for (const [name, asked] of Object.entries(asks)) {
    console.log(`${name.padEnd(28)} ${String(asked.length).padStart(4)} of ${total} ask (${((100 * asked.length) / total).toFixed(0)} %)`);
    if (process.argv.includes("--list")) for (const command of asked) console.log(`    ${command}`);
  }
}
