import assert from "node:assert/strict";
import { join } from "node:path";
import test from "node:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import {
  LAYERS,
  MAX_FUNCTION_LINES,
  climbs,
  cycles,
  functionSpans,
  importGraph,
  layerOf,
  longFunctions,
  relativeImports,
  trackedFiles,
} from "../../scripts/import-graph.ts";

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
  assert.deepEqual(
    cycles(
      new Map([
        ["x.ts", ["y.ts"]],
        ["y.ts", []],
      ]),
    ),
    [],
  );
});

test("the project has no import cycle", () => {
  const graph = importGraph(join(import.meta.dirname, "../.."));
  assert.ok(graph.size > 50, `the graph reads the project's files (${graph.size})`);
  assert.deepEqual(cycles(graph), []);
});

test("each file sits in the layer docs/architecture.md gives it: fixed file, then file name on its side, then folder", () => {
  const table: [string, string | undefined][] = [
    ["protocol/events.ts", "wire contract and common helpers"],
    ["common/errors.ts", "wire contract and common helpers"],
    ["lifecycle.ts", "extension: pure decisions and texts"],
    ["extension/command-channel/instruction-rules.ts", "extension: pure decisions and texts"],
    ["extension/command-channel/journal.ts", "extension: stores, clients and Pi edges"],
    ["extension/new-folder/new-file.ts", "extension: stores, clients and Pi edges"],
    ["extension/new-folder/new-rules.ts", "extension: pure decisions and texts"],
    ["extension/texts/messages.ts", "extension: pure decisions and texts"],
    ["activation.ts", "extension: stores, clients and Pi edges"],
    ["index.ts", "extension: entry"],
    ["a-new-root-file.ts", "extension: stores, clients and Pi edges"],
    ["server/watchdog/decisions.ts", "server: pure decisions and Koishi basics"],
    ["server/queue/store.ts", "server: stores and services"],
    ["server/console/decisions.ts", "server: pure decisions and Koishi basics"],
    ["server/console/run-rules.ts", "server: pure decisions and Koishi basics"],
    ["server/console/index.ts", "server: routes, tools, pages and edges"],
    ["server/standalone/start.ts", "server: entry"],
    ["server/rules.ts", "server: stores and services"],
    ["server/queue/routes.ts", "server: routes, tools, pages and edges"],
    ["server/chat/kit.ts", "server: routes, tools, pages and edges"],
    ["server/notify-webhook.ts", "server: entry"],
    ["harness/koishi.ts", "tests, harness, benchmarks, scripts, console page"],
    ["test/server/worker.test.ts", "tests, harness, benchmarks, scripts, console page"],
  ];
  for (const [file, layer] of table) assert.equal(layerOf(file)?.name, layer, file);
});

test("an import that climbs a layer or crosses sides is reported; one down or within a layer is not", () => {
  const graph = new Map([
    ["server/watchdog/decisions.ts", ["server/queue/store.ts", "protocol/wire.ts"]],
    ["server/queue/store.ts", ["server/queue/decisions.ts", "server/http/api.ts"]],
    ["server/queue/routes.ts", ["server/queue/store.ts", "server/chat/kit.ts"]],
    ["extension/notices/notifier.ts", ["server/koishi.ts", "lifecycle.ts"]],
    ["protocol/wire.ts", ["common/errors.ts", "extension/texts/messages.ts"]],
    ["test/server/worker.test.ts", ["server/notify-webhook.ts", "index.ts"]],
  ]);
  assert.deepEqual(climbs(graph), [
    "extension/notices/notifier.ts -> server/koishi.ts (the extension imports the server)",
    "protocol/wire.ts -> extension/texts/messages.ts (wire contract and common helpers imports extension: pure decisions and texts)",
    "server/queue/store.ts -> server/http/api.ts (server: stores and services imports server: routes, tools, pages and edges)",
    "server/watchdog/decisions.ts -> server/queue/store.ts (server: pure decisions and Koishi basics imports server: stores and services)",
  ]);
});

test("the layer table names folders, file-name patterns and only the files the user's layout fixes", () => {
  const allowed = /\/$|^\*\/(\*-)?[\w-]+\.ts$|^(index|lifecycle|activation|commands)\.ts$|^server\/notify-webhook\.ts$/;
  for (const layer of LAYERS) for (const path of layer.paths) assert.match(path, allowed, `${layer.name}: ${path}`);
});

test("a function is measured from its first line to its last, outer ones whole, in .ts and in a page part's script", () => {
  const body = (n: number) => Array.from({ length: n - 2 }, (_, i) => `  const v${i} = ${i};`).join("\n");
  const text = [
    `export function long() {\n${body(81)}\n}`,
    `export function edge() {\n${body(80)}\n}`,
    `const arrow = (x: number) => {\n${body(82)}\n};`,
    `class K {\n  method() {\n${body(83)}\n  }\n}`,
    `export function outer() {\n  const inner = () => {\n${body(79)}\n  };\n}`,
  ].join("\n");
  const long = functionSpans("a.ts", text).filter((span) => span.lines > MAX_FUNCTION_LINES);
  assert.deepEqual(
    long.map(({ name, lines }) => [name, lines]),
    [
      ["long", 81],
      ["arrow", 82],
      ["method", 83],
      ["outer", 81],
    ],
  );
  const vue = `<template>\n<p>x</p>\n</template>\n<script setup lang="ts">\nfunction shown() {\n${body(81)}\n}\n</script>\n`;
  assert.deepEqual(
    functionSpans("a.vue", vue).map(({ name, line, lines }) => [name, line, lines]),
    [["shown", 5, 81]],
  );
});

test("long functions are found in product files only, longest first", (t) => {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-long-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const fn = (name: string, n: number) => `function ${name}() {\n${"  1;\n".repeat(n - 2)}}\n`;
  writeFileSync(join(root, "a.ts"), fn("a", 81) + fn("b", 90) + fn("c", 80));
  mkdirSync(join(root, "test"));
  writeFileSync(join(root, "test", "x.test.ts"), fn("t", 200));
  assert.deepEqual(
    longFunctions(root, ["a.ts", "test/x.test.ts"]).map(({ file, name, lines }) => `${file} ${name} ${lines}`),
    ["a.ts b 90", "a.ts a 81"],
  );
});

test("the project's imports follow the layer order and no function is over 80 lines", () => {
  const root = join(import.meta.dirname, "../..");
  const graph = importGraph(root);
  assert.deepEqual(climbs(graph), []);
  assert.deepEqual(longFunctions(root, [...graph.keys(), ...trackedFiles(root, ".vue")]), []);
});
