/**
 * Every line the server logs for a person (info, warnings, errors) comes from the locale files, so
 * it is in the instance's language: no logger call takes words written in the code. Debug lines are
 * for developers and may stay in English.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join, relative } from "node:path";

const ROOT = join(import.meta.dirname, "../..");

function sources(dir: string): string[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((entry) => {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) return sources(path);
    return entry.name.endsWith(".ts") ? [path] : [];
  });
}

test("no server log line for a person is written in the code", () => {
  const found: string[] = [];
  for (const file of sources(join(ROOT, "server"))) {
    const text = readFileSync(file, "utf8");
    // A logger call whose first argument is a string literal: its words, once `%s` placeholders are gone.
    for (const match of text.matchAll(/\.(info|warn|error)\(\s*(["'`])((?:\\.|(?!\2)[^\\])*)\2/g)) {
      if (/[A-Za-z\u4e00-\u9fff]/.test(match[3]!.replace(/%[sdoOj]/g, "").replace(/\\n/g, ""))) {
        found.push(`${relative(ROOT, file)}: ${match[0].slice(0, 80)}`);
      }
    }
  }
  assert.deepEqual(found, []);
});
