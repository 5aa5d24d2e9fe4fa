/**
 * The import graph's rules from docs/architecture.md (no cycle; no arrow to a higher layer or across
 * sides) and the function-length limit, for `npm run check:imports` and test/structure/imports.test.ts.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";
import ts from "typescript";

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^"';]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Relative imports of one file's text, as written. */
export function relativeImports(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => (m[1] ?? m[2])!);
}

/** Every tracked (or new, not ignored) file under `root` whose name ends in `ending`. */
export function trackedFiles(root: string, ending: string): string[] {
  return execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", `*${ending}`], { cwd: root, encoding: "utf8" })
    .split("\n")
    .filter((file) => file.endsWith(ending));
}

/** file → the project files it imports, for every tracked .ts file under `root`. */
export function importGraph(root: string): Map<string, string[]> {
  const files = trackedFiles(root, ".ts");
  const known = new Set(files);
  const graph = new Map<string, string[]>();
  for (const file of files) {
    let text: string;
    try {
      text = readFileSync(join(root, file), "utf8");
    } catch {
      continue; // deleted in the work tree but still in the index
    }
    const targets = relativeImports(text)
      .map((spec) => relative(".", normalize(join(dirname(file), spec))))
      .filter((target) => known.has(target));
    graph.set(file, targets);
  }
  return graph;
}

/** Every strongly connected component with more than one file, or a file importing itself (Tarjan). */
export function cycles(graph: Map<string, string[]>): string[][] {
  let index = 0;
  const order = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  const visit = (node: string) => {
    order.set(node, index);
    low.set(node, index);
    index++;
    stack.push(node);
    onStack.add(node);
    for (const next of graph.get(node) ?? []) {
      if (!order.has(next)) {
        visit(next);
        low.set(node, Math.min(low.get(node)!, low.get(next)!));
      } else if (onStack.has(next)) {
        low.set(node, Math.min(low.get(node)!, order.get(next)!));
      }
    }
    if (low.get(node) === order.get(node)) {
      const component: string[] = [];
      let member: string;
      do {
        member = stack.pop()!;
        onStack.delete(member);
        component.push(member);
      } while (member !== node);
      if (component.length > 1 || (graph.get(node) ?? []).includes(node)) found.push(component.sort());
    }
  };
  for (const node of graph.keys()) if (!order.has(node)) visit(node);
  return found;
}

/** Where a file sits: its side (the two sides share only `shared`) and its rank (imports point to equal or lower ranks). */
export interface Layer {
  name: string;
  side: "shared" | "extension" | "server" | "tooling";
  rank: number;
  /** `folder/` a prefix, `*\/name.ts` any file of that name on the side, `*\/*-suffix.ts` any file whose name ends so, `path.ts` that one file
   * (the files the user's layout fixes: the top-level files and the plugin's entry). */
  paths: readonly string[];
}

/**
 * The layer order of docs/architecture.md, lowest first, by folder and file-name pattern only: a pure
 * module is named `decisions.ts` or `*-rules.ts`. A file no pattern names takes its side's default.
 */
export const LAYERS: readonly Layer[] = [
  { name: "wire contract and common helpers", side: "shared", rank: 0, paths: ["protocol/", "common/"] },
  { name: "extension: pure decisions and texts", side: "extension", rank: 1, paths: ["lifecycle.ts", "extension/texts/", "*/decisions.ts", "*/*-rules.ts"] },
  { name: "extension: stores, clients and Pi edges", side: "extension", rank: 2, paths: ["activation.ts", "extension/"] },
  // The host runs on the agent's machine beside Pi and reuses the extension's config, client and journal.
  { name: "extension: the host process", side: "extension", rank: 3, paths: ["host/"] },
  { name: "extension: entry", side: "extension", rank: 4, paths: ["index.ts", "commands.ts"] },
  { name: "server: pure decisions and Koishi basics", side: "server", rank: 1, paths: ["server/locales/", "*/decisions.ts", "*/*-rules.ts"] },
  { name: "server: stores and services", side: "server", rank: 2, paths: ["server/"] },
  {
    name: "server: routes, tools, pages and edges",
    side: "server",
    rank: 3,
    paths: ["server/http/", "server/chat/", "server/console/", "server/status/", "*/routes.ts", "*/plugin.ts"],
  },
  { name: "server: entry", side: "server", rank: 4, paths: ["server/notify-webhook.ts", "server/standalone/"] },
  { name: "tests, harness, benchmarks, scripts, console page", side: "tooling", rank: 5, paths: ["test/", "harness/", "bench/", "scripts/", "console/"] },
];

const sideOf = (file: string): Layer["side"] | undefined =>
  file.startsWith("server/") ? "server" : file.startsWith("extension/") || file.startsWith("host/") || !file.includes("/") ? "extension" : undefined;

/** How specifically `path` names `file` (higher wins), or -1: a file-name pattern beats any folder. */
function matchScore(path: string, file: string, base: string): number {
  if (path.startsWith("*/*")) return base.endsWith(path.slice(3)) ? 4_000 : -1;
  if (path.startsWith("*/")) return path.slice(2) === base ? 5_000 : -1;
  if (!path.endsWith("/")) return path === file ? 10_000 : -1;
  return file.startsWith(path) ? path.length : -1;
}

/** The layer a file sits in: the one naming it exactly, then a file name on its side, then the longest folder prefix. */
export function layerOf(file: string, layers: readonly Layer[] = LAYERS): Layer | undefined {
  const base = file.slice(file.lastIndexOf("/") + 1);
  const side = sideOf(file);
  let best: { layer: Layer; score: number } | undefined;
  for (const layer of layers) {
    for (const path of layer.paths) {
      const score = path.startsWith("*/") && layer.side !== side ? -1 : matchScore(path, file, base);
      if (score >= 0 && (!best || score > best.score)) best = { layer, score };
    }
  }
  return best?.layer ?? (side === "extension" ? layers.find((layer) => layer.paths.includes("extension/")) : undefined);
}

/** Every import that climbs to a higher layer or crosses between the extension and the server, as `from -> to (why)`. */
export function climbs(graph: Map<string, string[]>, layers: readonly Layer[] = LAYERS): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    const source = layerOf(from, layers);
    if (!source) continue;
    for (const to of targets) {
      const target = layerOf(to, layers);
      if (!target) continue;
      if ((source.side === "extension" || source.side === "server") && (target.side === "extension" || target.side === "server") && source.side !== target.side)
        found.push(`${from} -> ${to} (the ${source.side} imports the ${target.side})`);
      else if (target.rank > source.rank) found.push(`${from} -> ${to} (${source.name} imports ${target.name})`);
    }
  }
  return found.sort();
}

/** The function length the code keeps to (guide.md), in lines from the function's first line to its last. */
export const MAX_FUNCTION_LINES = 80;

/** One function, method, accessor or arrow of a source file, with where it starts and how many lines it spans. */
export interface FunctionSpan {
  file: string;
  line: number;
  name: string;
  lines: number;
}

/** The name a reader would look for: the declaration's own, else what it is assigned to, else `(anonymous)`. */
function functionName(node: ts.Node, source: ts.SourceFile): string {
  const named = node as ts.Node & { name?: ts.Node };
  if (named.name) return named.name.getText(source);
  if (ts.isConstructorDeclaration(node)) return "constructor";
  const parent = node.parent;
  if ((ts.isVariableDeclaration(parent) || ts.isPropertyAssignment(parent) || ts.isPropertyDeclaration(parent)) && parent.name)
    return parent.name.getText(source);
  if (ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText(source).slice(0, 40)})`;
  return "(anonymous)";
}

/** A page part's <script> blocks with everything else blanked, so line numbers stay those of the file. */
function vueScripts(text: string): string {
  let code = text.replace(/[^\n]/g, " ");
  for (const match of text.matchAll(/(<script\b[^>]*>)([\s\S]*?)<\/script>/g)) {
    const start = match.index + match[1]!.length;
    code = code.slice(0, start) + match[2]! + code.slice(start + match[2]!.length);
  }
  return code;
}

/** Every function in `text` (TypeScript, or the scripts of a `.vue` file), outer ones counted whole. */
export function functionSpans(file: string, text: string): FunctionSpan[] {
  const code = file.endsWith(".vue") ? vueScripts(text) : text;
  const source = ts.createSourceFile(file, code, ts.ScriptTarget.Latest, true, ts.ScriptKind.TS);
  const found: FunctionSpan[] = [];
  const visit = (node: ts.Node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      found.push({ file, line: start + 1, name: functionName(node, source), lines: end - start + 1 });
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** Product files: every source file outside tests, the harness, benchmarks and scripts. */
export const isProductFile = (file: string): boolean => !/^(test|harness|bench|scripts)\//.test(file);

/** The functions of `files` (read under `root`) longer than `limit` lines, longest first. */
export function longFunctions(root: string, files: Iterable<string>, limit: number = MAX_FUNCTION_LINES): FunctionSpan[] {
  const found: FunctionSpan[] = [];
  for (const file of files) {
    if (!isProductFile(file)) continue;
    for (const span of functionSpans(file, readFileSync(join(root, file), "utf8"))) if (span.lines > limit) found.push(span);
  }
  return found.sort((a, b) => b.lines - a.lines || a.file.localeCompare(b.file) || a.line - b.line);
}

if (import.meta.main) {
  const root = join(import.meta.dirname, "..");
  const graph = importGraph(root);
  const found = cycles(graph);
  for (const component of found) console.log(`cycle: ${component.join(" ↔ ")}`);
  console.log(found.length === 0 ? "no import cycles" : `${found.length} import cycle(s)`);
  const climbing = climbs(graph);
  for (const arrow of climbing) console.log(`against the layer order: ${arrow}`);
  console.log(climbing.length === 0 ? "every import follows the layer order" : `${climbing.length} import(s) against the layer order`);
  const long = longFunctions(root, [...graph.keys(), ...trackedFiles(root, ".vue")]);
  for (const span of long) console.log(`over ${MAX_FUNCTION_LINES} lines: ${span.file}:${span.line} ${span.name} (${span.lines} lines)`);
  console.log(`${long.length} function(s) over ${MAX_FUNCTION_LINES} lines`);
  process.exitCode = found.length + climbing.length + long.length === 0 ? 0 : 1;
}
