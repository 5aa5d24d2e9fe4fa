/** Which tool calls need a person, and what happens when nobody can answer. A command line is read with a
 * real bash grammar; anything the analysis cannot see through (`opaque.*`) always asks. */
import { createHash } from "node:crypto";
import { resolve } from "node:path";
import { COMMAND_ACTION_WORDS, commandWords, USER_RULE_ACTION } from "../../common/action-label.ts";
import { APPROVAL_LIMITS, PROTECTED_PATH_RULE, isOpaqueRule, type BuiltinRuleId } from "../../protocol/approvals.ts";
import { GIT_VALUE_OPTIONS } from "./program-rules.ts";
import { type CallPlace, expandHome, isProtectedPath, mentionsProtected, pathArguments, within } from "./protected-path-rules.ts";
import { literalArgv } from "./argv-rules.ts";
import { analyzeCommand, OPAQUE, type Analysis, type Run } from "./command-rules.ts";
import { strictFindings } from "./safe-rules.ts";
import type { ShellReader, Word } from "./shell-rules.ts";

/** The approval settings (schema-rules.ts) the policy reads; a user rule's `command` is a regular expression. */
export interface PolicySettings {
  mode: "strict" | "rules";
  allow: readonly (readonly string[])[];
  disabledRules: readonly BuiltinRuleId[];
  rules: readonly { id: string; tool: string; command?: string | undefined; label?: string | undefined; grantable?: boolean | undefined }[];
  grantableRules: readonly BuiltinRuleId[];
}

export type ToolCall = { tool: string; input: Record<string, unknown> };

/** Every rule a call matched (fail-closed findings first), a label for the person here (≤ 40 chars) and its code, which the server
 * words in its own language; where each rule matched; the literal argv when all resolved (the server binds grants to it). */
export interface RuleMatch {
  rules: string[];
  action: string;
  actionCode: string;
  sites: { rule: string; at: string }[];
  argv?: string[][];
}

type Found = { id: string; action: string; code: string; at?: string };

const COMMAND_TOOLS = new Set(["bash", "powershell"]);
const FILE_TOOLS = new Set(["write", "edit"]);
const HARMLESS_TARGETS = new Set(["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"]);

export function commandLine(call: ToolCall): string | undefined {
  const value = COMMAND_TOOLS.has(call.tool) ? call.input.command : undefined;
  return typeof value === "string" ? value : undefined;
}

/** The options before `--`: literal short letters, literal long names, and whether one that expands may be any option. */
function optionsOf(args: readonly Word[]): { short: string; long: string[]; unknown: boolean } {
  const end = args.findIndex((arg) => arg.value === "--");
  const options = end === -1 ? args : args.slice(0, end);
  const literal = options.map((arg) => arg.value).filter((value): value is string => value !== undefined);
  return {
    short: literal.map((value) => (/^-[A-Za-z]+$/.test(value) ? value.slice(1) : "")).join(""),
    long: literal.filter((value) => value.startsWith("--")).map((value) => value.split("=")[0]!),
    unknown: options.some((arg) => arg.value === undefined && arg.mayBeOption),
  };
}

/** A long option as getopt reads it: any unambiguous prefix of at least `--x`. */
const longOption = (given: readonly string[], name: string) => given.some((option) => option.length >= 3 && name.startsWith(option));

function isRecursiveDelete(run: Run): boolean {
  if (run.name === "find") return run.args.some((arg) => arg.value === "-delete");
  if (run.name !== "rm") return false;
  const { short, long, unknown } = optionsOf(run.args);
  return unknown || ((/[rR]/.test(short) || longOption(long, "--recursive")) && (short.includes("f") || longOption(long, "--force")));
}

/** `git [-C dir] [-c k=v] [--git-dir=…] <subcommand> args…` → subcommand (undefined when it expands) and its args. */
function gitSubcommand(run: Run): { name: string | undefined; args: Word[] } | undefined {
  if (run.name !== "git") return undefined;
  let i = 0;
  while (i < run.args.length && run.args[i]!.value?.startsWith("-")) {
    if (GIT_VALUE_OPTIONS.has(run.args[i]!.value!) || run.args[i]!.value === "-c") i++;
    i++;
  }
  const name = run.args[i];
  return name === undefined ? undefined : { name: name.value, args: run.args.slice(i + 1) };
}

/** A rule on git subcommand `name` (or one that expands and so may be): met by `test`, or by an option that expands. */
function gitRule(name: string, test: (options: ReturnType<typeof optionsOf>, args: readonly Word[]) => boolean): (run: Run) => boolean {
  return (run) => {
    const git = gitSubcommand(run);
    if (!git || (git.name !== name && git.name !== undefined)) return false;
    const options = optionsOf(git.args);
    return options.unknown || test(options, git.args);
  };
}

const isForcePush = gitRule(
  "push",
  ({ short, long }, args) =>
    /[fd]/.test(short) ||
    ["--force", "--force-with-lease", "--force-if-includes", "--mirror", "--delete", "--prune"].some((name) => longOption(long, name)) ||
    // A `+` refspec forces that one ref; `:ref` deletes it.
    args.some((arg) => /^[+:]./.test(arg.value ?? arg.text)),
);
const isHardReset = gitRule("reset", ({ long }) => ["--hard", "--merge", "--keep"].some((name) => long.includes(name)));
const isGitClean = gitRule("clean", ({ short, long }) => short.includes("f") || longOption(long, "--force"));

function isDiskWrite(run: Run): boolean {
  if (/^mkfs(\.|$)/.test(run.name) || ["wipefs", "shred", "fdisk", "sfdisk", "parted", "sgdisk"].includes(run.name)) return true;
  return (
    run.name === "dd" &&
    run.args.some((arg) => (arg.value === undefined ? arg.text.startsWith("of=") : /^of=\/dev\/(?!null$|zero$|stdout$|stderr$)/.test(arg.value)))
  );
}

export function outsideProject(path: string, place: CallPlace): boolean {
  const expanded = expandHome(path.trim(), place.home);
  if (expanded === "" || HARMLESS_TARGETS.has(expanded) || /^\/dev\/fd\//.test(expanded)) return false;
  // Variables, globs and braces cannot be resolved here: a write through one is treated as outside.
  if (/[$`*?{[]/.test(expanded)) return true;
  const target = resolve(place.cwd, expanded);
  const inside = (root: string) => within(resolve(root), target);
  return !inside(place.cwd) && !place.tempDirs.some(inside);
}

/** A word as a path: its value, or its text when it expands (which `outsideProject` treats as outside). */
const pathOf = (word: Word) => word.value ?? (/[$`*?{[]/.test(word.text) ? word.text : `$${word.text}`);

/** Where a command writes besides redirections: `tee`'s files, the destination of `cp`/`mv`/`install`/`ln`/`rsync`. */
function writeTargets(run: Run): Word[] {
  const operands = run.args.filter((arg) => !(arg.value ?? "").startsWith("-"));
  if (run.name === "tee") return operands;
  if (["cp", "mv", "install", "ln", "rsync"].includes(run.name) && operands.length >= 2) {
    const explicit = run.args.findIndex((arg) => arg.value === "-t" || arg.value === "--target-directory");
    return [explicit !== -1 && run.args[explicit + 1] ? run.args[explicit + 1]! : operands.at(-1)!];
  }
  return [];
}

/** The labels of the rules whose action is not the command's own words, in the session's language (the Pi catalogue). */
export type ActionWords = Record<"diskWrite" | "outside" | "opaque" | "protectedPath" | "notKnownSafe", string>;

/** Labelled by their command's words (`COMMAND_ACTION_WORDS`), `disk-write` by `ActionWords.diskWrite`. */
const BUILTIN_COMMAND_RULES: readonly { id: BuiltinRuleId; test(run: Run): boolean }[] = [
  { id: "rm-rf", test: isRecursiveDelete },
  { id: "sudo", test: (run) => ["sudo", "doas", "su", "pkexec", "run0", "runuser"].includes(run.name) },
  { id: "git-push-force", test: isForcePush },
  { id: "git-reset-hard", test: isHardReset },
  { id: "git-clean", test: isGitClean },
  { id: "disk-write", test: isDiskWrite },
];

/** The rules a command line matches: fail-closed findings (never switched off), then the enabled built-in ones. */
function commandRules(analysis: Analysis, place: CallPlace, enabled: (id: BuiltinRuleId) => boolean, words: ActionWords): Found[] {
  const found: Found[] = [...analysis.opaque].sort().map((id) => ({ id, action: words.opaque, code: "opaque" }));
  for (const rule of BUILTIN_COMMAND_RULES) {
    const hit = enabled(rule.id) ? analysis.runs.find(rule.test) : undefined;
    if (hit) found.push({ id: rule.id, action: COMMAND_ACTION_WORDS[rule.id] ?? words.diskWrite, code: rule.id, at: runText(hit) });
  }
  const writes = [...analysis.writes, ...analysis.runs.flatMap(writeTargets)];
  const escaping = enabled("write-outside-project") ? writes.find((word) => outsideProject(pathOf(word), place)) : undefined;
  if (escaping) found.push(outside(words, escaping.text));
  return found;
}

const runText = (run: Run) => [run.name, ...run.args.map((arg) => arg.text)].join(" ");
const outside = (words: ActionWords, at: string): Found => ({ id: "write-outside-project", action: words.outside, code: "write-outside-project", at });

/** Where a command line names a protected path: a word of a command, a redirection, or the text itself. */
function protectedSite(line: string, analysis: Analysis, place: CallPlace): string | undefined {
  const words = [...analysis.runs.flatMap((run) => run.args), ...analysis.writes, ...(analysis.script?.commands.flatMap((command) => command.words) ?? [])];
  // A script repeats its words: each distinct path is resolved once.
  const seen = new Set<string>();
  const isProtected = (path: string) => {
    if (seen.has(path)) return false;
    seen.add(path);
    return isProtectedPath(path, place);
  };
  for (const word of words) {
    const value = word.value ?? word.text;
    if (isProtected(value) || isProtected(value.slice(value.indexOf("=") + 1))) return word.text;
  }
  return mentionsProtected(line, place) ? line : undefined;
}

/** Every rule the call matches, or undefined when it needs nobody; `words` label the rules without command words of their own. */
export function matchCall(call: ToolCall, place: CallPlace, settings: PolicySettings, read: ShellReader, words: ActionWords): RuleMatch | undefined {
  const enabled = (id: BuiltinRuleId) => !settings.disabledRules.includes(id);
  const line = commandLine(call);
  const found: Found[] = [];
  let argv: string[][] | undefined;
  if (line !== undefined) {
    // PowerShell is not bash: nothing here can see what it will run.
    if (call.tool === "bash") {
      const analysis = analyzeCommand(line, read);
      found.push(...commandRules(analysis, place, enabled, words));
      const site = protectedSite(line, analysis, place);
      if (site !== undefined) found.push({ id: PROTECTED_PATH_RULE, action: words.protectedPath, code: PROTECTED_PATH_RULE, at: site });
      if (settings.mode === "strict") {
        const inside = (path: string) => !outsideProject(path, place);
        for (const finding of strictFindings(analysis.script, place, settings.allow, inside))
          found.push({ id: finding.rule, action: words.notKnownSafe, code: "strict", at: finding.at });
      }
      argv = literalArgv(analysis);
    } else found.push({ id: OPAQUE.parseError, action: words.opaque, code: "opaque", at: line });
  }
  if (FILE_TOOLS.has(call.tool) && enabled("write-outside-project")) {
    const path = call.input.path ?? call.input.file_path;
    if (typeof path === "string" && outsideProject(path, place)) found.push(outside(words, path));
  }
  const guardedPath = line === undefined ? pathArguments(call.input).find((path) => isProtectedPath(path, place)) : undefined;
  if (guardedPath !== undefined) found.push({ id: PROTECTED_PATH_RULE, action: words.protectedPath, code: PROTECTED_PATH_RULE, at: guardedPath });
  for (const rule of settings.rules) {
    if (rule.tool !== "*" && rule.tool !== call.tool) continue;
    if (rule.command !== undefined && (line === undefined || !new RegExp(rule.command).test(line))) continue;
    found.push({ id: rule.id, action: (rule.label ?? rule.id).slice(0, APPROVAL_LIMITS.actionChars), code: USER_RULE_ACTION });
  }
  if (found.length === 0) return undefined;
  const [first] = found as [Found];
  const sites = found.filter((rule) => rule.at !== undefined).map((rule) => ({ rule: rule.id, at: rule.at! }));
  // Every command-word rule it matched (`rm -rf + sudo`), as the server words it from `rules`.
  const action = (COMMAND_ACTION_WORDS[first.code as BuiltinRuleId] && commandWords(found.map((rule) => rule.code))) || first.action;
  return {
    rules: [...new Set(found.map((rule) => rule.id))].slice(0, APPROVAL_LIMITS.rulesMax),
    action: action.slice(0, APPROVAL_LIMITS.actionChars),
    actionCode: first.code,
    sites: sites.slice(0, APPROVAL_LIMITS.rulesMax),
    ...(argv ? { argv } : {}),
  };
}

/** Whether the owner may answer with a standing grant: never a fail-closed finding, only when the user made every rule grantable. */
export function grantable(rules: readonly string[], settings: PolicySettings): boolean {
  const failClosed = (rule: string) => isOpaqueRule(rule) || rule === PROTECTED_PATH_RULE || rule.startsWith("strict.");
  const granted = (rule: string) =>
    (settings.grantableRules as readonly string[]).includes(rule) || settings.rules.some((user) => user.id === rule && user.grantable === true);
  return rules.length > 0 && rules.every((rule) => !failClosed(rule) && granted(rule));
}

/** A person can answer: never in a subagent or print/json mode; otherwise a terminal dialog or the chat of a switched-on (`active`) session. */
export function personPresent(facts: { mode: string | undefined; hasUI: boolean; active: boolean; subagent: boolean }): boolean {
  if (facts.subagent || facts.mode === "print" || facts.mode === "json") return false;
  return facts.hasUI || facts.active;
}

export type GateDecision = { kind: "allow" } | { kind: "ask"; match: RuleMatch } | { kind: "block"; match: RuleMatch };

/** Without a person the policy answers at once: a command nobody can see through is refused even under `noPerson: "allow"`. */
export function decideGate(match: RuleMatch | undefined, present: boolean, noPerson: "reject" | "allow"): GateDecision {
  if (!match) return { kind: "allow" };
  if (present) return { kind: "ask", match };
  if (noPerson === "allow" && !match.rules.some(isOpaqueRule)) return { kind: "allow" };
  return { kind: "block", match };
}

/** JSON with object keys sorted at every level, so equal arguments always give equal text. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map((item) => canonicalJson(item ?? null)).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, item]) => item !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([key, item]) => `${JSON.stringify(key)}:${canonicalJson(item)}`).join(",")}}`;
  }
  return JSON.stringify(value) ?? "null";
}

export function argsDigest(input: unknown): string {
  return createHash("sha256").update(canonicalJson(input)).digest("hex");
}
