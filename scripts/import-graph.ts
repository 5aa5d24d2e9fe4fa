/**
 * The project's own import graph: every relative import (type-only ones included) between the
 * TypeScript files git tracks, and three rules on it that docs/architecture.md states: no cycle; no
 * arrow from a lower layer to a higher one (the `LAYERS` table), nor from one side to the other; no
 * source file over `MAX_LINES` without a one-line reason in its header. `npm run check:imports`
 * prints every breach and exits 1 when any exists; test/structure/imports.test.ts holds the same
 * rules in the suite.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

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
  /** `folder/` a prefix, `*\/name.ts` any file of that name on the side, else one file. The most specific match wins. */
  paths: readonly string[];
}

/** The layer order of docs/architecture.md, lowest first. A file no pattern names takes its side's default (the `folder/` patterns). */
export const LAYERS: readonly Layer[] = [
  { name: "wire contract and common helpers", side: "shared", rank: 0, paths: ["protocol/", "common/"] },
  {
    name: "extension: pure decisions and texts",
    side: "extension",
    rank: 1,
    paths: [
      "lifecycle.ts",
      "extension/messages.ts",
      "extension/texts/",
      "extension/session-labels.ts",
      "extension/state-bus.ts",
      "*/decisions.ts",
      "extension/config/schema.ts",
      "extension/config/layers.ts",
      "extension/approvals/policy.ts",
      "extension/approvals/programs.ts",
      "extension/approvals/protected.ts",
      "extension/approvals/argv.ts",
      "extension/approvals/runs.ts",
      "extension/approvals/safe.ts",
      "extension/approvals/shell.ts",
      "extension/notices/notice.ts",
      "extension/sink/payload.ts",
      "extension/sink/hold.ts",
    ],
  },
  { name: "extension: stores, clients and Pi edges", side: "extension", rank: 2, paths: ["extension/", "activation.ts"] },
  { name: "extension: entry", side: "extension", rank: 4, paths: ["index.ts", "commands.ts"] },
  {
    name: "server: pure decisions and Koishi basics",
    side: "server",
    rank: 1,
    paths: [
      "server/errors.ts",
      "server/rate-limit.ts",
      "server/koishi.ts",
      "server/bot.ts",
      "server/package-root.ts",
      "server/locales/",
      "*/decisions.ts",
      "server/queue/state.ts",
      "server/queue/image-decode.ts",
      "server/events/receipt.ts",
      "server/delivery/steps.ts",
      "server/audit/redaction.ts",
      "server/persona/block.ts",
      "server/console/model.ts",
      "server/console/runs.ts",
      "server/approvals/messages.ts",
    ],
  },
  { name: "server: stores and services", side: "server", rank: 2, paths: ["server/"] },
  {
    name: "server: routes, tools, pages and edges",
    side: "server",
    rank: 3,
    paths: [
      "server/http/",
      "*/routes.ts",
      "*/plugin.ts",
      "server/chat/",
      "server/console/",
      "server/status/",
      "server/persona/yesimbot-tools.ts",
      "server/persona/yesimbot-v3.ts",
      "server/audit/operator-requests.ts",
      "server/sessions/stream.ts",
      "server/retention.ts",
    ],
  },
  { name: "server: entry", side: "server", rank: 4, paths: ["server/notify-webhook.ts", "server/standalone.ts"] },
  { name: "tests, harness, benchmarks, scripts, console page", side: "tooling", rank: 5, paths: ["test/", "harness/", "bench/", "scripts/", "console/"] },
];

/** Arrows that break the order today, each with why it stays (empty is the goal). */
export const KNOWN_CLIMBS: ReadonlyMap<string, string> = new Map<string, string>([]);

const sideOf = (file: string): Layer["side"] | undefined =>
  file.startsWith("server/") ? "server" : file.startsWith("extension/") || !file.includes("/") ? "extension" : undefined;

/** The layer a file sits in: an exact name, then a file name on its side, then the longest folder prefix. */
export function layerOf(file: string, layers: readonly Layer[] = LAYERS): Layer | undefined {
  const base = file.slice(file.lastIndexOf("/") + 1);
  const side = sideOf(file);
  let best: { layer: Layer; score: number } | undefined;
  for (const layer of layers) {
    for (const path of layer.paths) {
      const score =
        path === file
          ? 10_000
          : path.startsWith("*/")
            ? path.slice(2) === base && layer.side === side
              ? 5_000
              : -1
            : path.endsWith("/") && file.startsWith(path)
              ? path.length
              : -1;
      if (score >= 0 && (!best || score > best.score)) best = { layer, score };
    }
  }
  return best?.layer ?? (side === "extension" ? layers.find((layer) => layer.paths.includes("extension/")) : undefined);
}

/** Every import that climbs to a higher layer or crosses between the extension and the server, as `from -> to (why)`. */
export function climbs(graph: Map<string, string[]>, layers: readonly Layer[] = LAYERS, known: ReadonlyMap<string, string> = KNOWN_CLIMBS): string[] {
  const found: string[] = [];
  for (const [from, targets] of graph) {
    const source = layerOf(from, layers);
    if (!source) continue;
    for (const to of targets) {
      const target = layerOf(to, layers);
      if (!target || known.has(`${from} -> ${to}`)) continue;
      if ((source.side === "extension" || source.side === "server") && (target.side === "extension" || target.side === "server") && source.side !== target.side)
        found.push(`${from} -> ${to} (the ${source.side} imports the ${target.side})`);
      else if (target.rank > source.rank) found.push(`${from} -> ${to} (${source.name} imports ${target.name})`);
    }
  }
  return found.sort();
}

/** Above this many lines a source file says why in its header (a line starting `Over 400 lines:`). */
export const MAX_LINES = 400;

/** Long files whose reason lives here, not in their header (files others were rewriting when the rule came). */
export const KNOWN_LONG: ReadonlyMap<string, string> = new Map<string, string>([]);

/** Source files (not tests) over `MAX_LINES` lines whose header gives no reason. */
export function longFiles(root: string, files: Iterable<string>, known: ReadonlyMap<string, string> = KNOWN_LONG): string[] {
  const found: string[] = [];
  for (const file of files) {
    if (file.startsWith("test/") || known.has(file)) continue;
    const text = readFileSync(join(root, file), "utf8");
    const lines = text.split("\n").length;
    // A page part's header is its first HTML comment; a module's, its first doc comment.
    const header = (file.endsWith(".vue") ? /^<!--[\s\S]*?-->/ : /^\/\*\*[\s\S]*?\*\//).exec(text)?.[0] ?? "";
    if (lines > MAX_LINES && !/^\s*(\*\s*)?Over 400 lines: \S/m.test(header)) found.push(`${file}: ${lines} lines`);
  }
  return found.sort();
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
  const long = longFiles(root, [...graph.keys(), ...trackedFiles(root, ".vue")]);
  for (const file of long) console.log(`over ${MAX_LINES} lines without a reason in its header: ${file}`);
  console.log(long.length === 0 ? `no file over ${MAX_LINES} lines without a reason` : `${long.length} long file(s) without a reason`);
  process.exitCode = found.length + climbing.length + long.length === 0 ? 0 : 1;
}
