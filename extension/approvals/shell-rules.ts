/** Reading a bash command line with tree-sitter-bash: every simple command wherever it sits, its words as
 * the shell will see them (literal only when nothing expands), its stdin and where it writes. */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import type { Tree } from "web-tree-sitter";

/** `value`: after quote removal, when nothing expands; `mayBeOption`: a literal `-…` or an expansion at its start. */
export interface Word {
  text: string;
  value: string | undefined;
  mayBeOption: boolean;
  /** A `<(…)` or `>(…)`. */
  processSubstitution: boolean;
}

export const plainWord = (text: string, mayBeOption = false): Word => ({ text, value: text, mayBeOption, processSubstitution: false });

export type Stdin =
  | { kind: "inherited" }
  | { kind: "pipe" }
  | { kind: "file"; literal: boolean }
  /** A here-document or here-string; `body` when it is literal (nothing in it expands). */
  | { kind: "inline"; body: string | undefined };

/** `words`: the program and its arguments (empty: assignments only). */
export type SimpleCommand = { words: Word[]; stdin: Stdin };

/** `definitions`: functions and aliases; `assignments`: every variable set, with its value when one word; `kinds`: every node
 * type (`arithmetic_command` for `((…))`); `expansions`, `tests`: each `${…}` and `[[ … ]]`, which strict mode reads. */
export interface Script {
  commands: SimpleCommand[];
  writes: Word[];
  definitions: Set<string>;
  assignments: { name: string; value: Word | undefined }[];
  kinds: Set<string>;
  expansions: string[];
  tests: string[];
}

export const emptyScript = (): Script => ({ commands: [], writes: [], definitions: new Set(), assignments: [], kinds: new Set(), expansions: [], tests: [] });

export type ShellReader = (source: string) => Script | undefined;

let loading: Promise<ShellReader> | undefined;

const LINE_CONTINUATION = /(?<!\\)((?:\\\\)*)\\\n/g;

/** The reader, once the grammar is loaded; `undefined` from the reader means the grammar rejects the text. */
export function loadShell(): Promise<ShellReader> {
  loading ??= (async () => {
    // Imported here, not with the extension: Pi's start does not wait for the grammar's runtime.
    const { Language, Parser } = await import("web-tree-sitter");
    await Parser.init();
    const require = createRequire(import.meta.url);
    const language = await Language.load(join(dirname(require.resolve("tree-sitter-bash/package.json")), "tree-sitter-bash.wasm"));
    const parser = new Parser();
    parser.setLanguage(language);
    const named = language.types.map((_, typeId) => language.nodeTypeIsNamed(typeId));
    return (source: string) => {
      // The grammar takes `\` + CR LF for a line continuation; bash does not.
      if (source.includes("\\\r")) return undefined;
      // bash joins lines at `\⏎` before it splits words; the grammar takes it for a blank.
      const joined = source.replace(LINE_CONTINUATION, "$1");
      const tree = parser.parse(joined);
      if (!tree) return undefined;
      try {
        if (tree.rootNode.hasError) return undefined;
        const reading: Reading = { script: emptyScript(), source: joined, trusted: true };
        visit(syntaxOf(tree, joined, named), INHERITED, reading);
        return reading.trusted ? reading.script : undefined;
      } finally {
        tree.delete();
      }
    };
  })();
  return loading;
}

/** A node copied out in one cursor walk: each property of tree-sitter's own nodes is a WASM call. */
interface Syntax {
  type: string;
  named: boolean;
  field: string | undefined;
  text: string;
  start: number;
  end: number;
  children: Syntax[];
  namedChildren: Syntax[];
}

const WITH_FIELDS = new Set(["command", "redirected_statement", "file_redirect", "variable_assignment", "function_definition"]);

function syntaxOf(tree: Tree, source: string, named: readonly boolean[]): Syntax {
  const cursor = tree.walk();
  const { types, fields } = tree.language;
  const copy = (withFields: boolean): Syntax => {
    const typeId = cursor.nodeTypeId;
    const start = cursor.startIndex;
    const end = cursor.endIndex;
    const type = types[typeId] || "ERROR";
    const node: Syntax = {
      type,
      named: named[typeId] ?? false,
      field: withFields ? (fields[cursor.currentFieldId] ?? undefined) : undefined,
      text: source.slice(start, end),
      start,
      end,
      children: [],
      namedChildren: [],
    };
    if (cursor.gotoFirstChild()) {
      const fielded = WITH_FIELDS.has(type);
      do {
        const child = copy(fielded);
        node.children.push(child);
        if (child.named) node.namedChildren.push(child);
      } while (cursor.gotoNextSibling());
      cursor.gotoParent();
    }
    return node;
  };
  try {
    return copy(false);
  } finally {
    cursor.delete();
  }
}

const field = (node: Syntax, name: string) => node.children.find((child) => child.field === name);
const fieldAll = (node: Syntax, name: string) => node.children.filter((child) => child.field === name);
const operatorOf = (node: Syntax) => node.children.find((child) => !child.named)?.text ?? "";

const EXPANDING = new Set(["simple_expansion", "expansion", "command_substitution", "process_substitution", "arithmetic_expansion", "brace_expression"]);

/** An unquoted word's value: backslashes removed; undefined when it globs. */
function bareValue(text: string): string | undefined {
  let out = "";
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (c === "\\") {
      if (text[i + 1] === "\n") i++;
      else if (i + 1 < text.length) out += text[++i];
      continue;
    }
    if ("*?[]".includes(c)) return undefined;
    out += c;
  }
  return out;
}

/** The inside of "…" without expansions: only `\$ \` \" \\` and line continuations are escapes there. */
function doubleQuotedValue(inner: string): string {
  return inner.replace(/\\([$`"\\\n])/g, (_, c: string) => (c === "\n" ? "" : c));
}

/** Escapes that stand for a control character; `\\ \' \" \?` stand for the character itself. */
const C_ESCAPES: Record<string, string> = { a: "\x07", b: "\b", e: "\x1b", E: "\x1b", f: "\f", n: "\n", r: "\r", t: "\t", v: "\v" };

export function ansiCValue(inner: string): string {
  return inner.replace(/\\(x[0-9A-Fa-f]{1,2}|u[0-9A-Fa-f]{1,4}|U[0-9A-Fa-f]{1,8}|[0-7]{1,3}|c.|.)/gs, (whole, esc: string) => {
    if (/^x/.test(esc)) return String.fromCodePoint(parseInt(esc.slice(1), 16));
    if (/^[uU]/.test(esc)) return String.fromCodePoint(Math.min(parseInt(esc.slice(1), 16), 0x10ffff));
    if (/^[0-7]/.test(esc)) return String.fromCodePoint(parseInt(esc, 8) & 0xff);
    if (esc[0] === "c" && esc.length === 2) return String.fromCodePoint(esc.charCodeAt(1) & 0x1f);
    return C_ESCAPES[esc] ?? (`\\'"?`.includes(esc) ? esc : whole);
  });
}

/** `{a,b}` and `{1..3}` expand into several words (a quoted one is counted too: erring towards "expands"). */
const BRACE_EXPANSION = /\{[^{}]*(,|\.\.)[^{}]*\}/;

function valueOf(node: Syntax): string | undefined {
  if ((node.type === "word" || node.type === "concatenation") && BRACE_EXPANSION.test(node.text)) return undefined;
  switch (node.type) {
    case "word":
    case "number":
      return bareValue(node.text);
    case "raw_string":
      return node.text.slice(1, -1);
    case "ansi_c_string":
      return ansiCValue(node.text.slice(2, -1));
    case "string":
      return node.namedChildren.some((child) => EXPANDING.has(child.type)) ? undefined : doubleQuotedValue(node.text.slice(1, -1));
    case "translated_string":
      return node.namedChildren[0] ? valueOf(node.namedChildren[0]) : undefined;
    case "concatenation": {
      const parts = node.children.map(valueOf);
      return parts.includes(undefined) ? undefined : parts.join("");
    }
    default:
      // `$` standing alone is a literal dollar.
      return node.text === "$" ? "$" : undefined;
  }
}

function wordOf(node: Syntax): Word {
  const value = valueOf(node);
  const first = node.type === "concatenation" ? node.children[0] : node;
  const head = first ? valueOf(first) : undefined;
  return {
    text: node.text,
    value,
    // An expansion at the start may expand to anything, `-rf` included.
    mayBeOption: value !== undefined ? value.startsWith("-") : head === undefined || head === "" || head.startsWith("-"),
    processSubstitution: node.type === "process_substitution",
  };
}

const INHERITED: Stdin = { kind: "inherited" };
const PIPED: Stdin = { kind: "pipe" };

function heredocStdin(redirect: Syntax): Stdin {
  const body = redirect.namedChildren.find((child) => child.type === "heredoc_body");
  if (!body) return { kind: "inline", body: "" };
  // A quoted delimiter makes the body literal; otherwise it is literal only without expansions in it.
  const quoted = /['"\\]/.test(redirect.namedChildren.find((child) => child.type === "heredoc_start")?.text ?? "");
  const literal = quoted || !body.namedChildren.some((child) => EXPANDING.has(child.type));
  return { kind: "inline", body: literal ? (quoted ? body.text : doubleQuotedValue(body.text)) : undefined };
}

function stdinOf(redirects: readonly Syntax[], outer: Stdin): Stdin {
  let stdin = outer;
  for (const redirect of redirects) {
    if (redirect.type === "heredoc_redirect") stdin = heredocStdin(redirect);
    else if (redirect.type === "herestring_redirect") {
      const word = redirect.namedChildren.find((child) => child.type !== "file_descriptor");
      const value = word ? valueOf(word) : undefined;
      stdin = { kind: "inline", body: value === undefined ? undefined : `${value}\n` };
    } else if (redirect.type === "file_redirect") {
      const op = operatorOf(redirect);
      const descriptor = field(redirect, "descriptor")?.text;
      const destination = field(redirect, "destination");
      if ((descriptor === undefined || descriptor === "0") && destination) {
        if (op === "<" || op === "<>") stdin = { kind: "file", literal: valueOf(destination) !== undefined };
        // `<&3`: another descriptor, opened who knows where.
        else if (op === "<&" && destination.text !== "-") stdin = { kind: "file", literal: false };
      }
    }
  }
  return stdin;
}

/** An unquoted word never holds a raw blank in bash: a word node that does (the grammar glues `a⏎\rm -rf x`) is misread. */
const BLANK_IN_WORD = /(?:^|[^\\])[ \t\n]/;

type Reading = { script: Script; source: string; trusted: boolean };

/** What strict mode reads of every node, and the constructs the grammar reads differently from bash. */
function note(node: Syntax, reading: Reading): void {
  const { script } = reading;
  script.kinds.add(node.type === "compound_statement" && node.text.startsWith("((") ? "arithmetic_command" : node.type);
  if (node.type === "expansion") script.expansions.push(node.text);
  else if (node.type === "test_command") script.tests.push(node.text);
  else if (node.type === "word" && BLANK_IN_WORD.test(node.text)) reading.trusted = false;
  // Escaped backticks nest a substitution inside a backtick one; the grammar reads them as text.
  else if (node.type === "command_substitution" && node.text.startsWith("`") && node.text.includes("\\`")) reading.trusted = false;
}

function visit(node: Syntax, stdin: Stdin, reading: Reading): void {
  note(node, reading);
  const { script } = reading;
  switch (node.type) {
    case "pipeline":
      // Every stage after the first reads the previous one's output.
      for (const [index, child] of node.namedChildren.entries()) visit(child, index === 0 ? stdin : PIPED, reading);
      return;
    case "redirected_statement": {
      const redirects = fieldAll(node, "redirect");
      const body = field(node, "body");
      for (const redirect of redirects) visit(redirect, INHERITED, reading);
      if (body) visit(body, stdinOf(redirects, stdin), reading);
      return;
    }
    case "command":
      command(node, stdin, reading);
      break;
    case "variable_assignment": {
      const name = field(node, "name");
      const value = field(node, "value");
      if (name) script.assignments.push({ name: name.text, value: value && value.type !== "array" ? wordOf(value) : undefined });
      break;
    }
    case "declaration_command":
      declaration(node, script);
      break;
    case "function_definition": {
      const name = field(node, "name");
      if (name) script.definitions.add(valueOf(name) ?? name.text);
      break;
    }
    case "file_redirect": {
      const op = operatorOf(node);
      const destination = field(node, "destination");
      // `>&2` and `2>&1` duplicate a descriptor; every other `>` form writes a file.
      if (destination && op.includes(">") && !(op.endsWith("&") && /^(\d+|-)$/.test(destination.text))) script.writes.push(wordOf(destination));
      break;
    }
    case "heredoc_redirect":
      // `cat <<EOF | sh`: the pipeline after the delimiter reads the here-document's command's output.
      for (const child of node.namedChildren) {
        if (child.type === "pipeline") for (const stage of child.namedChildren) visit(stage, PIPED, reading);
        else visit(child, INHERITED, reading);
      }
      return;
    case "command_substitution":
    case "process_substitution": {
      // Runs on its own: its input is not the enclosing command's, except `>(…)`, which reads what is written to it.
      const inner = node.text.startsWith(">(") ? PIPED : INHERITED;
      for (const child of node.namedChildren) visit(child, inner, reading);
      return;
    }
  }
  for (const child of node.namedChildren) visit(child, stdin, reading);
}

function command(node: Syntax, stdin: Stdin, reading: Reading): void {
  const { script } = reading;
  // Words of one command never span a line break bash would end the command at (`ls | ls⏎rm … < f` glued into one).
  const parts = node.children;
  const newlineBefore = (i: number) => reading.source.slice(parts[i - 1]!.end, parts[i]!.start).includes("\n");
  if (parts.some((part, i) => i > 0 && !part.type.startsWith("heredoc") && newlineBefore(i))) reading.trusted = false;
  const name = field(node, "name");
  const named = name?.namedChildren[0] ?? name;
  const words = [...(named ? [named] : []), ...fieldAll(node, "argument")].map(wordOf);
  script.commands.push({ words, stdin: stdinOf(fieldAll(node, "redirect"), stdin) });
  // Aliases defined here are called later by name.
  if (words[0]?.value === "alias") for (const word of words.slice(1)) if (word.value?.includes("=")) script.definitions.add(word.value.split("=")[0]!);
  // `hash -p /bin/rm ls` makes `ls` run rm.
  if (words[0]?.value === "hash" && words.some((word) => word.value?.startsWith("-p")))
    for (const word of words.slice(1)) if (word.value) script.definitions.add(word.value);
}

/** `export "PS4=…"`: an assignment written as a quoted word. */
function declaration(node: Syntax, script: Script): void {
  for (const child of node.namedChildren) {
    const value = child.type !== "variable_assignment" ? valueOf(child) : undefined;
    const match = value === undefined ? null : /^([A-Za-z_][A-Za-z0-9_]*)=([\s\S]*)$/.exec(value);
    if (match) script.assignments.push({ name: match[1]!, value: plainWord(match[2]!) });
  }
}
