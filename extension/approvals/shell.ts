/**
 * Reading a shell command line the way a rule needs it: the simple commands it runs (each an argv
 * after environment assignments and transparent wrappers such as `env` or `nohup`), with their
 * output redirections, including those nested in `sh -c '…'`, `eval`, `$(…)` and backticks. Pure.
 *
 * This is not a shell: it errs towards finding more commands (every separator splits, quotes only
 * group), because a rule that misses `rm -rf` hidden behind `;` or `$(…)` is worse than a question
 * the person did not need.
 */

export interface SimpleCommand {
  argv: string[];
  /** Targets of `>`, `>>`, `&>`, `2>` …: where the command writes. */
  writes: string[];
}

const SEPARATORS = new Set([";", "&&", "||", "|", "&", "\n", "(", ")", "{", "}", "|&"]);
const REDIRECT = /^(?:\d*|&)>>?\|?$/;
const ASSIGNMENT = /^[A-Za-z_][A-Za-z0-9_]*=/;
/** Commands that run their arguments as the real command. */
const WRAPPERS = new Set(["env", "command", "builtin", "exec", "nohup", "nice", "time", "timeout", "xargs", "stdbuf", "ionice", "chronic"]);
/** Wrapper options whose value is the next word (`env -u NAME`, `nice -n 5`, `xargs -I {}`). */
const WRAPPER_VALUE_OPTIONS = new Set(["-u", "-C", "-S", "-s", "-k", "-n", "-c", "-I", "-P", "-d", "-a", "-L", "-E", "--unset", "--chdir", "--signal", "--kill-after"]);
const SHELLS = new Set(["sh", "bash", "zsh", "dash", "ksh", "fish"]);
const MAX_DEPTH = 4;

type Token = { kind: "word"; text: string } | { kind: "op"; text: string };

/** Splits into words and operators; quotes group, `$(…)` and backticks become nested command text. */
function tokenize(line: string, nested: string[]): Token[] {
  const tokens: Token[] = [];
  let word = "";
  let inWord = false;
  const flush = () => {
    if (inWord) tokens.push({ kind: "word", text: word });
    word = "";
    inWord = false;
  };
  for (let i = 0; i < line.length; i++) {
    const c = line[i]!;
    if (c === "\\" && i + 1 < line.length) {
      // A line continuation joins; any other escaped character is literal.
      if (line[i + 1] !== "\n") {
        word += line[i + 1];
        inWord = true;
      }
      i++;
    } else if (c === "'") {
      const end = line.indexOf("'", i + 1);
      const stop = end === -1 ? line.length : end;
      word += line.slice(i + 1, stop);
      inWord = true;
      i = stop;
    } else if (c === '"') {
      let j = i + 1;
      while (j < line.length && line[j] !== '"') {
        if (line[j] === "\\" && j + 1 < line.length) {
          word += line[j + 1];
          j += 2;
          continue;
        }
        if (line[j] === "$" && line[j + 1] === "(") {
          const close = matchingParen(line, j + 1);
          nested.push(line.slice(j + 2, close));
          word += line.slice(j, close + 1);
          j = close + 1;
          continue;
        }
        if (line[j] === "`") {
          const close = line.indexOf("`", j + 1);
          const stop = close === -1 ? line.length : close;
          nested.push(line.slice(j + 1, stop));
          j = stop + 1;
          continue;
        }
        word += line[j];
        j++;
      }
      inWord = true;
      i = j;
    } else if (c === "$" && line[i + 1] === "(") {
      const close = matchingParen(line, i + 1);
      nested.push(line.slice(i + 2, close));
      word += line.slice(i, close + 1);
      inWord = true;
      i = close;
    } else if (c === "`") {
      const close = line.indexOf("`", i + 1);
      const stop = close === -1 ? line.length : close;
      nested.push(line.slice(i + 1, stop));
      inWord = true;
      i = stop;
    } else if (c === " " || c === "\t" || c === "\r") {
      flush();
    } else if (c === "#" && !inWord) {
      const end = line.indexOf("\n", i);
      i = end === -1 ? line.length : end - 1;
    } else if (c === ">" || c === "<") {
      // `2>`, `&>`, `>>`, `>|`: the digits or & before belong to the operator.
      let op = /^\d+$|^&$/.test(word) && inWord ? word : (flush(), "");
      word = "";
      inWord = false;
      op += c;
      while (line[i + 1] === ">" || line[i + 1] === "|" || line[i + 1] === "&") op += line[++i];
      tokens.push({ kind: "op", text: op });
    } else if (";&|(){}\n".includes(c)) {
      flush();
      const two = line.slice(i, i + 2);
      if (two === "&&" || two === "||" || two === "|&") {
        tokens.push({ kind: "op", text: two });
        i++;
      } else tokens.push({ kind: "op", text: c });
    } else {
      word += c;
      inWord = true;
    }
  }
  flush();
  return tokens;
}

function matchingParen(line: string, open: number): number {
  let depth = 0;
  for (let i = open; i < line.length; i++) {
    if (line[i] === "(") depth++;
    else if (line[i] === ")" && --depth === 0) return i;
  }
  return line.length;
}

/** Every simple command the line runs, nested ones included. */
export function simpleCommands(line: string, depth = 0): SimpleCommand[] {
  if (depth > MAX_DEPTH) return [];
  const nested: string[] = [];
  const tokens = tokenize(line, nested);
  const commands: SimpleCommand[] = [];
  let current: SimpleCommand = { argv: [], writes: [] };
  const close = () => {
    commands.push(...unwrap(current, depth));
    current = { argv: [], writes: [] };
  };
  for (let i = 0; i < tokens.length; i++) {
    const token = tokens[i]!;
    if (token.kind === "op" && SEPARATORS.has(token.text)) close();
    else if (token.kind === "op") {
      const target = tokens[i + 1];
      if (target?.kind === "word") {
        if (REDIRECT.test(token.text) && !target.text.startsWith("&")) current.writes.push(target.text);
        i++;
      }
    } else current.argv.push(token.text);
  }
  close();
  for (const inner of nested) commands.push(...simpleCommands(inner, depth + 1));
  return commands.filter((command) => command.argv.length > 0 || command.writes.length > 0);
}

/** Drops assignments and transparent wrappers; `sh -c '…'` and `eval …` are read as command lines. */
function unwrap(command: SimpleCommand, depth: number): SimpleCommand[] {
  let argv = command.argv;
  for (;;) {
    while (argv.length > 0 && ASSIGNMENT.test(argv[0]!)) argv = argv.slice(1);
    const name = commandName(argv[0]);
    if (name === undefined) break;
    if (WRAPPERS.has(name)) {
      argv = argv.slice(1);
      // The wrapper's own options and values (`env -u X`, `timeout 10`, `nice -n 5`) come first.
      while (argv.length > 0 && (argv[0]!.startsWith("-") || /^\d+(\.\d+)?[smhd]?$/.test(argv[0]!) || ASSIGNMENT.test(argv[0]!))) {
        argv = argv.slice(WRAPPER_VALUE_OPTIONS.has(argv[0]!) ? 2 : 1);
      }
      continue;
    }
    if (SHELLS.has(name)) {
      const flag = argv.findIndex((arg) => /^-[a-z]*c[a-z]*$/.test(arg));
      const script = flag === -1 ? undefined : argv[flag + 1];
      if (script !== undefined) return [{ argv, writes: command.writes }, ...simpleCommands(script, depth + 1)];
    }
    if (name === "eval") return [{ argv, writes: command.writes }, ...simpleCommands(argv.slice(1).join(" "), depth + 1)];
    break;
  }
  return [{ argv, writes: command.writes }];
}

/** `/usr/bin/rm` and `rm` are the same command; `\rm` (alias bypass) too. */
export function commandName(word: string | undefined): string | undefined {
  if (word === undefined) return undefined;
  return word.replace(/^\\/, "").split("/").pop();
}
