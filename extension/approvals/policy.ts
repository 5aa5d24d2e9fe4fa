/**
 * Which tool calls need a person, and what happens when nobody can answer. Pure: the gate in
 * gate.ts feeds it the call exactly as Pi will run it and the session's facts.
 *
 * Built-in rules cover the usual destructive set; the user turns any of them off by id
 * (`approval.disabledRules`) and adds their own (`approval.rules`: a tool name or `*`, and for
 * tools with a command line a regular expression on it).
 */
import { createHash } from "node:crypto";
import { isAbsolute, relative, resolve } from "node:path";
import { isOpaqueRule, type BuiltinRuleId } from "../../protocol/approvals.ts";
import { commandName, simpleCommands, type SimpleCommand } from "./shell.ts";

export interface UserRule {
  id: string;
  /** A tool name, or `*` for every tool. */
  tool: string;
  /** A regular expression tested on the command line of a tool that has one (`bash`). */
  command?: string | undefined;
  /** Shown to the person as the action. */
  label?: string | undefined;
  /** The owner may answer with a standing grant. */
  grantable?: boolean | undefined;
}

export interface PolicySettings {
  disabledRules: readonly BuiltinRuleId[];
  rules: readonly UserRule[];
  /** Built-in rules the owner may answer with a standing grant. */
  grantableRules: readonly BuiltinRuleId[];
}

/** Where the call runs: relative paths resolve against `cwd`; `~` against `home`; temp folders are not "the project" but not guarded either. */
export interface CallPlace {
  cwd: string;
  home: string;
  tempDirs: readonly string[];
}

export interface ToolCall {
  tool: string;
  input: Record<string, unknown>;
}

export interface RuleMatch {
  rule: string;
  /** A short label for the person (≤ 40 chars). */
  action: string;
}

const COMMAND_TOOLS = new Set(["bash", "powershell"]);
const FILE_TOOLS = new Set(["write", "edit"]);
/** Where writing is never "outside the project" in a way that matters. */
const HARMLESS_TARGETS = new Set(["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"]);

/** The command line of a call, for tools that have one. */
export function commandLine(call: ToolCall): string | undefined {
  const value = COMMAND_TOOLS.has(call.tool) ? call.input.command : undefined;
  return typeof value === "string" ? value : undefined;
}

// ── Built-in rules over one simple command ──────────────────────────────────

function shortFlags(argv: readonly string[]): string {
  return argv.filter((arg) => /^-[A-Za-z]+$/.test(arg)).map((arg) => arg.slice(1)).join("");
}

function isRmRecursiveForce(argv: readonly string[]): boolean {
  if (commandName(argv[0]) !== "rm") return false;
  const args = argv.slice(1);
  const end = args.indexOf("--");
  const options = end === -1 ? args : args.slice(0, end);
  const short = shortFlags(options);
  const recursive = /[rR]/.test(short) || options.includes("--recursive");
  const force = short.includes("f") || options.includes("--force");
  return recursive && force;
}

const ELEVATE = new Set(["sudo", "doas", "su", "pkexec", "run0"]);

/** `git [-C dir] [-c k=v] [--git-dir=…] <subcommand> args…` → subcommand and its args. */
function gitSubcommand(argv: readonly string[]): { name: string; args: string[] } | undefined {
  if (commandName(argv[0]) !== "git") return undefined;
  let i = 1;
  while (i < argv.length && argv[i]!.startsWith("-")) {
    // Options that take the next word as their value.
    if (["-C", "-c", "--git-dir", "--work-tree", "--namespace", "--exec-path"].includes(argv[i]!)) i++;
    i++;
  }
  const name = argv[i];
  return name === undefined ? undefined : { name, args: argv.slice(i + 1) };
}

function isForcePush(argv: readonly string[]): boolean {
  const git = gitSubcommand(argv);
  if (git?.name !== "push") return false;
  return git.args.some(
    (arg) =>
      arg === "--force" ||
      arg.startsWith("--force-with-lease") ||
      arg === "--force-if-includes" ||
      arg === "--mirror" ||
      arg === "--delete" ||
      (/^-[A-Za-z]+$/.test(arg) && /[fd]/.test(arg)) ||
      // A `+` refspec forces that one ref.
      /^\+[^\s]+/.test(arg) ||
      /^:[^\s]+/.test(arg),
  );
}

function isHardReset(argv: readonly string[]): boolean {
  const git = gitSubcommand(argv);
  return git?.name === "reset" && git.args.some((arg) => arg === "--hard" || arg === "--merge" || arg === "--keep");
}

function isGitClean(argv: readonly string[]): boolean {
  const git = gitSubcommand(argv);
  return git?.name === "clean" && (shortFlags(git.args).includes("f") || git.args.includes("--force"));
}

function isDiskWrite(argv: readonly string[]): boolean {
  const name = commandName(argv[0]) ?? "";
  if (/^mkfs(\.|$)/.test(name) || name === "wipefs" || name === "shred" || name === "fdisk" || name === "parted") return true;
  return name === "dd" && argv.some((arg) => /^of=\/dev\/(?!null$|zero$|stdout$|stderr$)/.test(arg));
}

// ── Writes outside the project ──────────────────────────────────────────────

function expandHome(path: string, home: string): string {
  if (path === "~") return home;
  return path.startsWith("~/") ? home + path.slice(1) : path;
}

/** Whether writing `path` from `place.cwd` lands outside the project folder (temp folders excepted). */
export function outsideProject(path: string, place: CallPlace): boolean {
  const expanded = expandHome(path.trim(), place.home);
  if (expanded === "" || HARMLESS_TARGETS.has(expanded) || /^\/dev\/fd\//.test(expanded)) return false;
  // Variables and globs cannot be resolved here: a write through one is treated as outside.
  if (/[$`*?]/.test(expanded)) return true;
  const target = resolve(place.cwd, expanded);
  const inside = (root: string) => {
    const rel = relative(resolve(root), target);
    return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
  };
  return !inside(place.cwd) && !place.tempDirs.some(inside);
}

/** Where a simple command writes: its redirections, `tee`'s files, the destination of `cp`/`mv`/`install`/`ln`. */
function writeTargets(command: SimpleCommand): string[] {
  const targets = [...command.writes];
  const name = commandName(command.argv[0]);
  const operands = command.argv.slice(1).filter((arg) => !arg.startsWith("-"));
  if (name === "tee") targets.push(...operands);
  if ((name === "cp" || name === "mv" || name === "install" || name === "ln" || name === "rsync") && operands.length >= 2) {
    const explicit = command.argv.findIndex((arg) => arg === "-t" || arg === "--target-directory");
    targets.push(explicit !== -1 && command.argv[explicit + 1] ? command.argv[explicit + 1]! : operands.at(-1)!);
  }
  return targets;
}

// ── The decision ────────────────────────────────────────────────────────────

const BUILTIN_COMMAND_RULES: readonly { id: BuiltinRuleId; action: string; test(argv: readonly string[]): boolean }[] = [
  { id: "rm-rf", action: "rm -rf", test: isRmRecursiveForce },
  { id: "sudo", action: "sudo", test: (argv) => ELEVATE.has(commandName(argv[0]) ?? "") },
  { id: "git-push-force", action: "git push --force", test: isForcePush },
  { id: "git-reset-hard", action: "git reset --hard", test: isHardReset },
  { id: "git-clean", action: "git clean -f", test: isGitClean },
  { id: "disk-write", action: "写磁盘设备 (disk write)", test: isDiskWrite },
];
const OUTSIDE_ACTION = "写入项目外 (write outside project)";

/** The first rule the call matches, or undefined when it needs nobody. */
export function matchCall(call: ToolCall, place: CallPlace, settings: PolicySettings): RuleMatch | undefined {
  const enabled = (id: BuiltinRuleId) => !settings.disabledRules.includes(id);
  const line = commandLine(call);
  if (line !== undefined) {
    const commands = simpleCommands(line);
    for (const rule of BUILTIN_COMMAND_RULES) {
      if (enabled(rule.id) && commands.some((command) => rule.test(command.argv))) return { rule: rule.id, action: rule.action };
    }
    if (enabled("write-outside-project") && commands.some((command) => writeTargets(command).some((target) => outsideProject(target, place)))) {
      return { rule: "write-outside-project", action: OUTSIDE_ACTION };
    }
  }
  if (FILE_TOOLS.has(call.tool) && enabled("write-outside-project")) {
    const path = call.input.path ?? call.input.file_path;
    if (typeof path === "string" && outsideProject(path, place)) return { rule: "write-outside-project", action: OUTSIDE_ACTION };
  }
  for (const rule of settings.rules) {
    if (rule.tool !== "*" && rule.tool !== call.tool) continue;
    if (rule.command !== undefined && (line === undefined || !new RegExp(rule.command).test(line))) continue;
    return { rule: rule.id, action: (rule.label ?? rule.id).slice(0, 40) };
  }
  return undefined;
}

/**
 * Whether the owner may answer these matched rules with a standing grant: never for a fail-closed
 * finding, only when the user made every one of them grantable. (The server decides again.)
 */
export function grantable(rules: readonly string[], settings: PolicySettings): boolean {
  return (
    rules.length > 0 &&
    rules.every((rule) =>
      isOpaqueRule(rule)
        ? false
        : (settings.grantableRules as readonly string[]).includes(rule) || settings.rules.some((user) => user.id === rule && user.grantable === true),
    )
  );
}

/** Who could answer now. */
export interface PersonFacts {
  mode: string | undefined;
  hasUI: boolean;
  /** The session is switched on (its owner can answer from chat). */
  active: boolean;
  subagent: boolean;
}

/** A person can answer: never in a subagent or print/json mode; otherwise a terminal dialog or the switched-on chat. */
export function personPresent(facts: PersonFacts): boolean {
  if (facts.subagent || facts.mode === "print" || facts.mode === "json") return false;
  return facts.hasUI || facts.active;
}

export type NoPersonPolicy = "reject" | "allow";

/** `block`: nobody can answer, so the call is refused at once (the gate words it in the session's language). */
export type GateDecision = { kind: "allow" } | { kind: "ask"; match: RuleMatch } | { kind: "block"; match: RuleMatch };

/** What the gate does with a call. Nothing ever approves itself: without a person, the policy answers at once. */
export function decideGate(match: RuleMatch | undefined, present: boolean, noPerson: NoPersonPolicy): GateDecision {
  if (!match) return { kind: "allow" };
  if (present) return { kind: "ask", match };
  if (noPerson === "allow") return { kind: "allow" };
  return { kind: "block", match };
}

// ── Binding ─────────────────────────────────────────────────────────────────

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
