import assert from "node:assert/strict";
import { join } from "node:path";
import test from "node:test";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { KNOWN_CLIMBS, KNOWN_LONG, climbs, cycles, importGraph, layerOf, longFiles, relativeImports, trackedFiles } from "../../scripts/import-graph.ts";

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

test("each file sits in the layer docs/architecture.md gives it: exact name, then file name on its side, then folder", () => {
  const table: [string, string | undefined][] = [
    ["protocol/events.ts", "wire contract and common helpers"],
    ["common/errors.ts", "wire contract and common helpers"],
    ["lifecycle.ts", "extension: pure decisions and texts"],
    ["extension/command-channel/instruction-rules.ts", "extension: pure decisions and texts"],
    ["extension/command-channel/journal.ts", "extension: stores, clients and Pi edges"],
    ["extension/new-folder/new-file.ts", "extension: stores, clients and Pi edges"],
    ["activation.ts", "extension: stores, clients and Pi edges"],
    ["index.ts", "extension: entry"],
    ["a-new-root-file.ts", "extension: stores, clients and Pi edges"],
    ["server/watchdog/decisions.ts", "server: pure decisions and Koishi basics"],
    ["server/queue/store.ts", "server: stores and services"],
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
    ["extension/notices/notifier.ts", ["common/domain-error.ts", "lifecycle.ts"]],
    ["protocol/wire.ts", ["common/errors.ts", "extension/texts/messages.ts"]],
    ["test/server/worker.test.ts", ["server/notify-webhook.ts", "index.ts"]],
  ]);
  assert.deepEqual(climbs(graph, undefined, new Map()), [
    "extension/notices/notifier.ts -> common/domain-error.ts (the extension imports the server)",
    "protocol/wire.ts -> extension/texts/messages.ts (wire contract and common helpers imports extension: pure decisions and texts)",
    "server/queue/store.ts -> server/http/api.ts (server: stores and services imports server: routes, tools, pages and edges)",
    "server/watchdog/decisions.ts -> server/queue/store.ts (server: pure decisions and Koishi basics imports server: stores and services)",
  ]);
  assert.deepEqual(climbs(graph, undefined, new Map([["server/queue/store.ts -> server/http/api.ts", "a reason"]])).length, 3);
});

test("a source file over 400 lines needs a reason in its header; tests do not", (t) => {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-long-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  const body = "export const x = 1;\n".repeat(401);
  writeFileSync(join(root, "long.ts"), `/** A long file. */\n${body}`);
  writeFileSync(join(root, "reasoned.ts"), `/**\n * A long file.\n * Over 400 lines: one table that reads best whole.\n */\n${body}`);
  writeFileSync(join(root, "short.ts"), "/** Short. */\nexport const y = 2;\n");
  const template = "<p>x</p>\n".repeat(401);
  writeFileSync(join(root, "long.vue"), `<template>\n${template}</template>\n`);
  writeFileSync(
    join(root, "reasoned.vue"),
    `<!-- A long page part.\n  Over 400 lines: one form that reads best whole. -->\n<template>\n${template}</template>\n`,
  );
  assert.deepEqual(longFiles(root, ["long.ts", "reasoned.ts", "short.ts", "test/x.test.ts", "long.vue", "reasoned.vue"]), [
    "long.ts: 403 lines",
    "long.vue: 404 lines",
  ]);
});

test("the project's imports follow the layer order and its long files say why (every known exception has a reason)", () => {
  const root = join(import.meta.dirname, "../..");
  const graph = importGraph(root);
  assert.deepEqual(climbs(graph), []);
  assert.deepEqual(longFiles(root, [...graph.keys(), ...trackedFiles(root, ".vue")]), []);
  for (const [what, why] of [...KNOWN_CLIMBS, ...KNOWN_LONG]) assert.ok(why.length > 10, `${what} has a reason`);
});
