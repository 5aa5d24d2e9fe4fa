/** The README's statement of what the extension needs at run time, in both language sections, is package.json's dependencies. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";

const ROOT = join(import.meta.dirname, "../..");

test("the README names exactly the runtime dependencies of package.json, in the Chinese and the English section", () => {
  const readme = readFileSync(join(ROOT, "README.md"), "utf8");
  const dependencies = Object.keys(
    (JSON.parse(readFileSync(join(ROOT, "package.json"), "utf8")) as { dependencies: Record<string, string> }).dependencies,
  ).sort();
  const statements = [/扩展运行时的依赖是([^；\n]*)/, /At run time the extension needs ([^;\n]*)/].map((pattern) => pattern.exec(readme)?.[1]);
  for (const statement of statements) {
    assert.ok(statement, "the statement is there");
    assert.deepEqual([...statement.matchAll(/`([^`]+)`/g)].map((m) => m[1]).sort(), dependencies, statement);
  }
});
