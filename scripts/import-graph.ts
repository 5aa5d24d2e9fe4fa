/**
 * The project's own import graph: every relative import (type-only ones included) between the
 * TypeScript files git tracks. `npm run check:imports` prints each cycle and exits 1 when any exists;
 * test/structure/imports.test.ts holds the same rule in the suite.
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { dirname, join, normalize, relative } from "node:path";

const IMPORT = /(?:^|\n)\s*(?:import|export)\b[^"';]*?\bfrom\s*["'](\.{1,2}\/[^"']+)["']|\bimport\(\s*["'](\.{1,2}\/[^"']+)["']\s*\)/g;

/** Relative imports of one file's text, as written. */
export function relativeImports(text: string): string[] {
  return [...text.matchAll(IMPORT)].map((m) => (m[1] ?? m[2])!);
}

/** file → the project files it imports, for every tracked .ts file under `root`. */
export function importGraph(root: string): Map<string, string[]> {
  const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "*.ts"], { cwd: root, encoding: "utf8" })
    .split("\n")
    .filter((file) => file.endsWith(".ts"));
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

if (import.meta.main) {
  const found = cycles(importGraph(join(import.meta.dirname, "..")));
  for (const component of found) console.log(`cycle: ${component.join(" ↔ ")}`);
  console.log(found.length === 0 ? "no import cycles" : `${found.length} import cycle(s)`);
  process.exitCode = found.length === 0 ? 0 : 1;
}
