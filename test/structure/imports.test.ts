import assert from "node:assert/strict";
import { join } from "node:path";
import test from "node:test";
import { cycles, importGraph, relativeImports } from "../../scripts/import-graph.ts";

test("relative imports are found in every form, type-only and re-exports included", () => {
  const text = [
    'import { a } from "./a.ts";',
    'import type { B } from "../b.ts";',
    "import {\n  c,\n  type D,\n} from './c.ts';",
    'export { e } from "./e.ts";',
    'const f = await import("./f.ts");',
    'import { g } from "node:fs";',
    'import { h } from "zod";',
  ].join("\n");
  assert.deepEqual(relativeImports(text), ["./a.ts", "../b.ts", "./c.ts", "./e.ts", "./f.ts"]);
});

test("cycles are reported, chains are not", () => {
  const graph = new Map([
    ["a.ts", ["b.ts"]],
    ["b.ts", ["c.ts"]],
    ["c.ts", ["a.ts"]],
    ["d.ts", ["a.ts"]],
    ["e.ts", ["e.ts"]],
  ]);
  assert.deepEqual(cycles(graph), [["a.ts", "b.ts", "c.ts"], ["e.ts"]]);
  assert.deepEqual(cycles(new Map([["x.ts", ["y.ts"]], ["y.ts", []]])), []);
});

test("the project has no import cycle", () => {
  const graph = importGraph(join(import.meta.dirname, "../.."));
  assert.ok(graph.size > 50, `the graph reads the project's files (${graph.size})`);
  assert.deepEqual(cycles(graph), []);
});
