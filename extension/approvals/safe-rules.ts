/** Strict mode: a line runs unasked only when every simple command is safe-listed with safe arguments, or under an allowed prefix. */
import type { Script, Word } from "./shell-rules.ts";
import { CODE_VARIABLES } from "./program-rules.ts";
import type { CallPlace } from "./protected-path-rules.ts";

/** One reason a command line is not known safe, and where in it (the command or construct, as written). */
export interface Finding {
  rule: StrictRule;
  at: string;
}

export const STRICT_RULES = {
  unlisted: "strict.unlisted",
  arguments: "strict.arguments",
  /** A construct the analysis does not know, or one where bash evaluates hidden code (arithmetic, `${x@P}`, `[[ x -eq 0 ]]` …). */
  construct: "strict.construct",
  write: "strict.write",
  /** An assignment to a variable that changes what runs (`PATH`, `BASH_ENV`, `GIT_*` …). */
  variable: "strict.variable",
  unreadable: "strict.unreadable",
} as const;
export type StrictRule = (typeof STRICT_RULES)[keyof typeof STRICT_RULES];

/** The nodes of a line that is only commands and words, in lists and pipelines (argv.ts sends such a line's words). */
export const COMMAND_KINDS: readonly string[] =
  "program comment list pipeline command command_name word string string_content raw_string ansi_c_string concatenation number".split(" ");

/** Grammar nodes whose meaning is plain: everything else (arithmetic, declarations, functions, `for ((…))` …) asks. */
const KNOWN_KINDS = new Set([
  ...COMMAND_KINDS,
  ...`translated_string simple_expansion expansion variable_name special_variable_name command_substitution process_substitution
  redirected_statement file_redirect file_descriptor heredoc_redirect heredoc_start heredoc_body heredoc_content heredoc_end herestring_redirect
  subshell compound_statement negated_command variable_assignment test_command binary_expression unary_expression parenthesized_expression
  test_operator regex if_statement elif_clause else_clause for_statement while_statement do_group case_statement case_item brace_expression
  extglob_pattern`.split(/\s+/),
]);

/** `${NAME}`, `${#NAME}`, `${NAME:-…}` and the like: no subscript, offset, indirection or `@` operator, each of which can evaluate code. */
const PLAIN_EXPANSION = /^\$\{(#?[A-Za-z_][A-Za-z0-9_]*|[0-9@*#?$!-])(:?[-+][^}]*)?\}$/;

const RISKY_VARIABLE =
  /^(PATH|HOME|IFS|CDPATH|ENV|TMPDIR|GLOBIGNORE|SHELL|BASH.*|LD_.*|DYLD_.*|GIT_.*|PS\d|PROMPT_COMMAND|SHELLOPTS|BASHOPTS|.*PAGER|.*EDITOR)$/;

/** `[[ … ]]` / `test`: no `-v`/`-R` (they evaluate subscripts) and arithmetic comparisons only between plain integers. */
function testIsPlain(operands: readonly string[]): boolean {
  if (operands.some((word) => word === "-v" || word === "-R")) return false;
  if (!operands.some((word) => /^-(eq|ne|lt|le|gt|ge)$/.test(word))) return true;
  return operands.every((word) => /^-?\d+$/.test(word) || /^(-(eq|ne|lt|le|gt|ge)|!|\(|\)|&&|\|\||-a|-o|\[\[|\]\]|\[|\])$/.test(word));
}

type Check = (args: readonly Word[], place: CallPlace) => boolean;

const literal = (args: readonly Word[]): args is readonly (Word & { value: string })[] => args.every((arg) => arg.value !== undefined);

/** A glob inside the project (`src/*.ts`) is fine for a program whose every option is harmless; anything that expands or leaves the project is not. */
function harmlessWord(word: Word, place: CallPlace): boolean {
  if (word.value !== undefined) return true;
  if (/[$`]/.test(word.text) || /^[~/]/.test(word.text) || /(^|\/)\.\.(\/|$)/.test(word.text)) return false;
  // In the home folder itself, a glob can reach the user's own dotfiles.
  return place.cwd !== place.home;
}

const PLAIN: Check = (args, place) => args.every((arg) => harmlessWord(arg, place));

/** Literal words without any of the short letters (in a cluster) or long names (by getopt's unambiguous prefix) before `--`. */
function without(short: string, long: readonly string[] = []): Check {
  return (args) => {
    if (!literal(args)) return false;
    for (const { value: arg } of args) {
      if (arg === "--") return true;
      if (arg.startsWith("--")) {
        const name = arg.split("=")[0]!;
        if (long.some((option) => name.length >= 3 && option.startsWith(name))) return false;
      } else if (arg.startsWith("-") && [...arg.slice(1)].some((letter) => short.includes(letter))) return false;
    }
    return true;
  };
}

const TEST: Check = (args) => literal(args) && testIsPlain(args.map((arg) => arg.value));

const FIND_ACTIONS = new Set(["-exec", "-execdir", "-ok", "-okdir", "-delete", "-fprint", "-fprint0", "-fprintf", "-fls"]);

/** `sed -n` with print commands over line numbers, `$` and plain `/regex/` addresses only. */
const SED_PRINT = /^\s*(?:(?:\d+|\$|\/[^/\\\n]*\/)(?:\s*,\s*(?:\d+|\$|\/[^/\\\n]*\/))?)?\s*p\s*$/;
function sedCheck(args: readonly Word[]): boolean {
  if (!literal(args)) return false;
  let quiet = false;
  const scripts: string[] = [];
  const operands: string[] = [];
  for (let i = 0; i < args.length; i++) {
    const arg = args[i]!.value;
    if (arg === "-n" || arg === "--quiet" || arg === "--silent") quiet = true;
    else if (arg === "-E" || arg === "-r" || arg === "-s" || arg === "-u" || arg === "-z" || arg === "--") continue;
    else if (arg === "-e") scripts.push(args[++i]?.value ?? "w");
    else if (arg.startsWith("-e")) scripts.push(arg.slice(2));
    else if (/^-n[Ers]*$|^-[Ers]*n[Ers]*$/.test(arg)) quiet = true;
    else if (arg.startsWith("-")) return false;
    else operands.push(arg);
  }
  if (scripts.length === 0 && operands.length > 0) scripts.push(operands.shift()!);
  return quiet && scripts.length > 0 && scripts.every((script) => script.split(/[;\n]/).every((part) => SED_PRINT.test(part)));
}

const DIFF_OUTPUT = ["--output", "--ext-diff", "--textconv"];

/** git subcommands that only read, each with the options it must not have. */
const GIT_READ: Record<string, Check> = {
  ...Object.fromEntries("rev-parse ls-files ls-tree rev-list merge-base name-rev show-ref describe shortlog version".split(" ").map((s) => [s, without("")])),
  ...Object.fromEntries(["log", "diff", "show"].map((sub) => [sub, without("", DIFF_OUTPUT)])),
  status: without("", ["--output"]),
  blame: without("", ["--contents"]),
  "cat-file": without("", ["--textconv", "--filters"]),
  grep: without("O", ["--open-files-in-pager", "--ext-grep"]),
  branch: (args) =>
    literal(args) &&
    (args.every((arg) => /^(-a|-r|-v|-vv|--all|--remotes|--verbose|--show-current|--no-color|--list|-l)$/.test(arg.value)) ||
      (args.some((arg) => arg.value === "--list" || arg.value === "-l") &&
        args.every((arg) => !arg.value.startsWith("-") || /^(-a|-r|-v|-vv|--all|--remotes|--verbose|--list|-l)$/.test(arg.value)))),
  remote: (args) => literal(args) && args.every((arg) => arg.value === "-v" || arg.value === "--verbose"),
  // The first word must say it only lists; `without` then checks every word is literal.
  tag: (args, place) =>
    (args.length === 0 || args[0]!.value === "-l" || args[0]!.value === "--list") &&
    without("dfsuam", ["--delete", "--force", "--sign", "--annotate", "--message", "--file"])(args, place),
  stash: (args, place) => (args[0]?.value === "list" || args[0]?.value === "show") && without("", DIFF_OUTPUT)(args, place),
  reflog: (args, place) =>
    (args.length === 0 || args[0]!.value === "show" || args[0]!.value?.startsWith("-") === true) && without("", ["--output"])(args, place),
};

/** `git [--no-pager] <read-only subcommand> …`: no `-c`, `-C`, `--git-dir`, `-p` … (other settings can run commands). */
function gitCheck(args: readonly Word[], place: CallPlace): boolean {
  let i = 0;
  while (args[i]?.value === "--no-pager" || args[i]?.value === "--no-optional-locks" || args[i]?.value === "-P") i++;
  const sub = args[i]?.value;
  return sub !== undefined && Object.hasOwn(GIT_READ, sub) && GIT_READ[sub]!(args.slice(i + 1), place);
}

/** Toolchains whose `--version` alone only prints (anything more is the toolchain running code). */
const VERSION_ONLY = new Set("node python python3 npm pnpm yarn npx cargo rustc go deno bun java ruby perl gcc clang make tsc".split(" "));

const PLAIN_PROGRAMS =
  "ls cat head tail wc grep egrep fgrep pwd which stat du df true false diff cmp comm cut tr nl tac basename dirname realpath readlink md5sum sha1sum sha256sum sha512sum whoami jq ps id uname";

export const SAFE_PROGRAMS: Readonly<Record<string, Check>> = {
  ...Object.fromEntries(PLAIN_PROGRAMS.split(" ").map((name) => [name, PLAIN])),
  cd: (args) => literal(args),
  // Words only printed: any expansion is fine there (the commands in it are checked on their own).
  echo: () => true,
  printf: (args) => args[0]?.value !== undefined && !args[0].value.startsWith("-v") && args.slice(1).every((arg) => arg.value !== "-v"),
  test: TEST,
  "[": TEST,
  file: without("Cm", ["--compile", "--magic-file"]),
  date: without("s", ["--set"]),
  tree: without("oR", ["--fromfile"]),
  sort: without("oT", ["--output", "--compress-program", "--temporary-directory"]),
  uniq: (args) => literal(args) && args.filter((arg) => !arg.value.startsWith("-")).length <= 1,
  rg: without("", ["--pre", "--pre-glob", "--hostname-bin", "--search-zip"]),
  env: (args) => literal(args) && args.every((arg) => arg.value === "-0" || arg.value === "--null"),
  printenv: (args) => literal(args) && args.every((arg) => !arg.value.startsWith("-") || arg.value === "-0"),
  find: (args) => literal(args) && !args.some((arg) => FIND_ACTIONS.has(arg.value)),
  sed: sedCheck,
  git: gitCheck,
};

type InsideProject = (path: string) => boolean;

export function commandFinding(words: readonly Word[], place: CallPlace, allow: readonly (readonly string[])[], inside: InsideProject): Finding | undefined {
  const at = words.map((word) => word.text).join(" ");
  const program = words[0]!.value;
  if (program === undefined || program.includes("/")) return { rule: STRICT_RULES.unlisted, at };
  if (allowedByPrefix(words, allow, inside)) return undefined;
  if (VERSION_ONLY.has(program) && words.length === 2 && words[1]!.value === "--version") return undefined;
  const check = Object.hasOwn(SAFE_PROGRAMS, program) ? SAFE_PROGRAMS[program] : undefined;
  if (!check) return { rule: STRICT_RULES.unlisted, at };
  return check(words.slice(1), place) ? undefined : { rule: STRICT_RULES.arguments, at };
}

/** An exact argv prefix of the user's, and every later word a literal that names no path outside the project. */
export function allowedByPrefix(words: readonly Word[], allow: readonly (readonly string[])[], inside: InsideProject): boolean {
  return allow.some(
    (prefix) =>
      prefix.length > 0 &&
      prefix.length <= words.length &&
      prefix.every((part, i) => words[i]!.value === part) &&
      words.slice(prefix.length).every((word) => word.value !== undefined && pathsOf(word.value).every(inside)),
  );
}

function pathsOf(value: string): string[] {
  const parts = value.includes("=") ? [value, value.slice(value.indexOf("=") + 1)] : [value];
  return parts.filter((part) => /^[~/]/.test(part) || /(^|\/)\.\.(\/|$)/.test(part));
}

/** Every reason the command line is not known safe (empty: it runs without a person). */
export function strictFindings(script: Script | undefined, place: CallPlace, allow: readonly (readonly string[])[], inside: InsideProject): Finding[] {
  if (!script) return [{ rule: STRICT_RULES.unreadable, at: "" }];
  const found: Finding[] = [];
  for (const kind of script.kinds) if (!KNOWN_KINDS.has(kind)) found.push({ rule: STRICT_RULES.construct, at: kind });
  for (const text of script.expansions) if (!PLAIN_EXPANSION.test(text)) found.push({ rule: STRICT_RULES.construct, at: text });
  for (const text of script.tests) {
    const operands = text.split(/\s+/).filter(Boolean);
    if (/[$`'"\\]/.test(text) || !testIsPlain(operands)) found.push({ rule: STRICT_RULES.construct, at: text });
  }
  for (const { name } of script.assignments)
    if (RISKY_VARIABLE.test(name) || CODE_VARIABLES.test(name) || !/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) found.push({ rule: STRICT_RULES.variable, at: name });
  const changesDirectory = script.commands.some((command) => command.words[0]?.value === "cd" || command.words[0]?.value === "pushd");
  for (const target of script.writes) {
    // After a `cd`, a relative target is relative to somewhere else.
    const path = target.value;
    if (path === undefined || (changesDirectory && !/^\/dev\/(null|stdout|stderr)$/.test(path)) || !inside(path))
      found.push({ rule: STRICT_RULES.write, at: target.text });
  }
  for (const command of script.commands) {
    if (command.words.length === 0) continue;
    const finding = commandFinding(command.words, place, allow, inside);
    // git in another folder reads that folder's settings, which can run commands.
    if (!finding && changesDirectory && command.words[0]!.value === "git")
      found.push({ rule: STRICT_RULES.arguments, at: command.words.map((w) => w.text).join(" ") });
    else if (finding) found.push(finding);
  }
  return found;
}
