/** What a command line will run: every simple command followed through wrappers, `sh -c`, `find -exec`,
 * `eval` of literals and here-documents; whatever the analysis cannot see through is an `opaque.*` finding. */
import { emptyScript, plainWord, type Script, type ShellReader, type Stdin, type Word } from "./shell-rules.ts";
import {
  ASSIGNMENT,
  AWKS,
  CODE_VARIABLES,
  ENV_ASSIGNMENT,
  GIT_COMMAND_KEYS,
  GIT_VALUE_OPTIONS,
  INTERPRETERS,
  isOtherDescriptor,
  isStdinPath,
  parseOptions,
  SCRIPT_OPTIONS,
  SHELL_OPTIONS,
  SHELLS,
  SU_OPTIONS,
  WATCH_OPTIONS,
  WRAPPERS,
  type Interpreter,
  type Options,
} from "./program-rules.ts";

export const OPAQUE = {
  dynamicProgram: "opaque.dynamic-program",
  eval: "opaque.eval",
  pipedInterpreter: "opaque.piped-interpreter",
  inlineCode: "opaque.inline-code",
  function: "opaque.function",
  source: "opaque.source",
  parseError: "opaque.parse-error",
  nesting: "opaque.nesting",
  tooLong: "opaque.too-long",
} as const;

/** Reading blocks Pi while it runs (a few µs a character). */
const MAX_ANALYZED_CHARS = 262_144;
const MAX_DEPTH = 4;

export type Run = { name: string; args: Word[] };

/** `script`: the command line as the grammar read it (not the scripts within it). */
export interface Analysis {
  runs: Run[];
  writes: Word[];
  opaque: Set<string>;
  script: Script | undefined;
}

export function analyzeCommand(source: string, read: ShellReader): Analysis {
  const out: Analysis = { runs: [], writes: [], opaque: new Set(), script: undefined };
  script(source, { read, out, depth: 0, defined: new Set(), stdin: { kind: "inherited" } });
  return out;
}

/** `defined`: functions and aliases the script or an enclosing one defines; `stdin`: what "inherited" is here. */
interface Env {
  read: ShellReader;
  out: Analysis;
  depth: number;
  defined: ReadonlySet<string>;
  stdin: Stdin;
}

const RESERVED = new Set("if then else elif fi for while until do done case esac select function time coproc in".split(" "));
/** Plain words only (no quoting, expansion, glob, brace, tilde, comment or operator): bash splits such a line on spaces alone. */
const PLAIN_LINE = /^[A-Za-z0-9_./:@%+,=-]+(?: +[A-Za-z0-9_./:@%+,=-]+)* *$/;

/** The fast path: a plain line is one simple command whose words are exactly its space-separated parts. */
function plainScript(source: string): Script | undefined {
  if (!PLAIN_LINE.test(source)) return undefined;
  const words = source.split(" ").filter(Boolean);
  const assignments: Script["assignments"] = [];
  while (words.length > 0 && ASSIGNMENT.test(words[0]!)) {
    const [name, ...rest] = words.shift()!.split("=");
    assignments.push({ name: name!, value: plainWord(rest.join("=")) });
  }
  if (words.length > 0 && RESERVED.has(words[0]!)) return undefined;
  const commands = [{ words: words.map((text) => plainWord(text, text.startsWith("-"))), stdin: { kind: "inherited" } as const }];
  return { ...emptyScript(), commands, assignments };
}

const opaque = (env: Env, finding: string): void => void env.out.opaque.add(finding);

function script(source: string, env: Env): void {
  if (env.depth > MAX_DEPTH) return opaque(env, OPAQUE.nesting);
  if (source.length > MAX_ANALYZED_CHARS) return opaque(env, OPAQUE.tooLong);
  let parsed = plainScript(source);
  try {
    parsed ??= env.read(source);
  } catch {
    // A failure of the reader itself (a stack too deep, the WASM heap) reads as unparsable.
  }
  if (env.depth === 0) env.out.script = parsed;
  if (!parsed) return opaque(env, OPAQUE.parseError);
  env.out.writes.push(...parsed.writes);
  for (const { name, value } of parsed.assignments) assignment(name, value, env);
  const inner: Env = { ...env, defined: new Set([...env.defined, ...parsed.definitions]) };
  for (const command of parsed.commands)
    if (command.words.length > 0) run(command.words, command.stdin.kind === "inherited" ? env.stdin : command.stdin, inner);
}

/** A variable set for the script or one command: an exported function, or code for a variable something runs. */
function assignment(name: string, value: Word | undefined, env: Env): void {
  if (name.startsWith("BASH_FUNC_")) opaque(env, OPAQUE.function);
  else if (CODE_VARIABLES.test(name) && !(value?.value !== undefined && /^[\w./@%+=:,-]*$/.test(value.value))) opaque(env, OPAQUE.inlineCode);
}

function run(words: readonly Word[], stdin: Stdin, env: Env): void {
  const program = words[0]!;
  if (program.value === undefined) return opaque(env, OPAQUE.dynamicProgram);
  if (env.defined.has(program.value)) opaque(env, OPAQUE.function);
  // `/usr/bin/rm` and `rm` are the same command.
  const name = program.value.split("/").at(-1)!;
  const args = words.slice(1);
  env.out.runs.push({ name, args });

  const wrapper = WRAPPERS[name];
  if (wrapper) return unwrap(name, args, wrapper, stdin, env);
  if (SHELLS.has(name)) return shell(args, stdin, env);
  if (name === "su" || name === "runuser" || name === "script") {
    // `su -c 'code'` and `script -c 'code'` run it in a new shell.
    const code = parseOptions(args, name === "script" ? SCRIPT_OPTIONS : SU_OPTIONS).seen;
    const script = code.get("-c") ?? code.get("--command");
    return script ? inline(script, stdin, env) : undefined;
  }
  if (name === "watch") {
    const { operands } = parseOptions(args, WATCH_OPTIONS);
    return operands === undefined ? undefined : joined(args.slice(operands), stdin, env, OPAQUE.inlineCode);
  }
  if (name === "eval") return joined(args, stdin, env, OPAQUE.eval);
  // `trap 'code' EXIT` runs its code later in this shell.
  if (name === "trap" && args[0] && !args[0].value?.startsWith("-")) return inline(args[0], { kind: "inherited" }, env);
  if (name === "source" || name === ".") {
    const file = args[0];
    if (
      file &&
      (file.value === undefined || file.processSubstitution || (isStdinPath(file.value) && stdin.kind !== "inherited") || isOtherDescriptor(file.value))
    )
      opaque(env, OPAQUE.source);
    return;
  }
  if (name === "find") return findExec(args, env);
  if (name === "git") return gitConfig(args, env);
  if (AWKS.has(name)) {
    const { operands, seen } = parseOptions(args, { short: "fvF" });
    if (!seen.has("-f") && operands !== undefined && args[operands]!.value === undefined) opaque(env, OPAQUE.inlineCode);
    return;
  }
  const interpreter = INTERPRETERS.find(([pattern]) => pattern.test(name))?.[1];
  if (interpreter) interpret(args, interpreter, stdin, env);
}

function unwrap(name: string, args: readonly Word[], spec: Options, stdin: Stdin, env: Env): void {
  const { operands, seen } = parseOptions(args, spec);
  // `env NAME=value cmd` sets NAME for cmd.
  for (const word of spec.assignments ? args.slice(0, operands ?? args.length) : []) {
    const set = word.value === undefined ? null : ENV_ASSIGNMENT.exec(word.value);
    if (set) assignment(set[1]!, { ...word, text: set[2]!, value: set[2]! }, env);
  }
  // `env -S 'cmd args'` splits a string into the command.
  const split = seen.get("-S") ?? seen.get("--split-string");
  if (name === "env" && split) return inline(split, stdin, env);
  // `command -v x` only looks a name up.
  if (name === "command" && (seen.has("-v") || seen.has("-V"))) return;
  if (operands === undefined) return;
  const inner = args.slice(operands);
  // A coprocess reads what the script writes to it later: a pipe.
  if (name !== "xargs") return run(inner, name === "coproc" ? { kind: "pipe" } : stdin, env);
  // xargs puts words read from its input in place of the replace string, else after the command: they may be anything, options included.
  const replace = (seen.get("-I") ?? seen.get("--replace"))?.value ?? (seen.has("-i") ? "{}" : undefined);
  const input = { ...plainWord("<xargs input>", true), value: undefined };
  if (replace) run(substituted(inner, replace, input), { kind: "inherited" }, env);
  else run([...inner, input], { kind: "inherited" }, env);
}

/** Words holding `marker` stand for what will be put there at run time: unknown. */
function substituted(words: readonly Word[], marker: string, unknown: Word): Word[] {
  return words.map((word) =>
    word.value?.includes(marker) || (word.value === undefined && word.text.includes(marker)) ? { ...unknown, text: word.text } : word,
  );
}

/** A script given as one word: read one level deeper when it is literal, else nothing can be seen. */
function inline(code: Word, stdin: Stdin, env: Env): void {
  if (code.value === undefined) opaque(env, OPAQUE.inlineCode);
  else script(code.value, { ...env, depth: env.depth + 1, stdin });
}

/** Operands a shell joins with spaces and runs (`eval`, `watch`). */
function joined(words: readonly Word[], stdin: Stdin, env: Env, finding: string): void {
  if (words.some((word) => word.value === undefined)) opaque(env, finding);
  else inline(plainWord(words.map((word) => word.value).join(" ")), stdin, env);
}

/** Code a program reads from standard input: a literal here-document is read; a pipe or anything that expands cannot be seen. */
function fromStdin(stdin: Stdin, env: Env, read: boolean): void {
  if (stdin.kind === "pipe" || (stdin.kind === "file" && !stdin.literal) || (stdin.kind === "inline" && stdin.body === undefined)) {
    opaque(env, OPAQUE.pipedInterpreter);
  } else if (read && stdin.kind === "inline" && stdin.body !== undefined) inline(plainWord(stdin.body), { kind: "inherited" }, env);
}

function shell(args: readonly Word[], stdin: Stdin, env: Env): void {
  const { operands, seen } = parseOptions(args, SHELL_OPTIONS);
  const first = operands === undefined ? undefined : args[operands];
  if (seen.has("-c")) return first ? inline(first, stdin, env) : undefined;
  if (first === undefined || seen.has("-s") || (first.value !== undefined && isStdinPath(first.value))) return fromStdin(stdin, env, true);
  if (first.processSubstitution || first.value === undefined || isOtherDescriptor(first.value)) opaque(env, OPAQUE.pipedInterpreter);
}

function interpret(args: readonly Word[], interpreter: Interpreter, stdin: Stdin, env: Env): void {
  const { operands, seen } = parseOptions(args, interpreter.options);
  const code = interpreter.code.find((option) => seen.has(option));
  if (code !== undefined) return seen.get(code)?.value === undefined ? opaque(env, OPAQUE.inlineCode) : undefined;
  if (interpreter.module?.some((option) => seen.has(option))) return;
  const script = operands === undefined ? undefined : args[operands];
  if (script === undefined || (script.value !== undefined && isStdinPath(script.value))) return fromStdin(stdin, env, false);
  if (script.processSubstitution || (script.value !== undefined && isOtherDescriptor(script.value))) opaque(env, OPAQUE.pipedInterpreter);
}

/** `find … -exec cmd … ;` runs `cmd` (also `-execdir`, `-ok`, `-okdir`). */
function findExec(args: readonly Word[], env: Env): void {
  for (let i = 0; i < args.length; i++) {
    if (!["-exec", "-execdir", "-ok", "-okdir"].includes(args[i]!.value ?? "")) continue;
    let end = i + 1;
    while (end < args.length && args[end]!.value !== ";" && args[end]!.value !== "+") end++;
    // `{}` is a found path (`./…`, never an option), but any name the model could have given a file.
    if (end > i + 1) run(substituted(args.slice(i + 1, end), "{}", { ...plainWord("{}"), value: undefined }), { kind: "inherited" }, env);
    i = end;
  }
}

/** `git -c alias.x='!rm -rf ~' x` and the like make git run a command of the model's choosing. */
function gitConfig(args: readonly Word[], env: Env): void {
  for (let i = 0; i < args.length && args[i]!.value?.startsWith("-"); i++) {
    const option = args[i]!.value!;
    if (GIT_VALUE_OPTIONS.has(option)) {
      i++;
      continue;
    }
    const setting = option === "-c" ? args[++i] : option.startsWith("--config-env") ? args[option.includes("=") ? i : ++i] : undefined;
    if (!setting) continue;
    const key = setting.value?.replace(/^--config-env=/, "").split("=")[0];
    if (key === undefined || GIT_COMMAND_KEYS.test(key)) opaque(env, OPAQUE.inlineCode);
  }
}
