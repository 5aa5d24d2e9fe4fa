/** The documents cite only files that are in the repository, so a move or rename cannot leave a dead pointer. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { dirname, join, resolve } from "node:path";

const repo = resolve(import.meta.dirname, "../..");
const documents = [
  "README.md",
  ...readdirSync(join(repo, "docs"))
    .filter((name) => name.endsWith(".md"))
    .map((name) => `docs/${name}`),
];
// A path from the repository's root: one of its top-level folders, then a file with an extension; or `.ci/run`.
const CITED = /\b(?:bench|common|console|docs|extension|harness|packages|protocol|scripts|server|test)\/[\w./-]*\w\.(?:ts|md|json|yml|vue|scss)\b|\.ci\/run\b/g;
// A Markdown link to a file of the repository (root files such as config.example.json are cited this way).
const LINK = /\]\((?!https?:|mailto:|#)([^)\s#]+)(?:#[^)]*)?\)/g;

test("every repository path the README and docs/ cite exists", () => {
  const missing = documents.flatMap((document) =>
    [...readFileSync(join(repo, document), "utf8").matchAll(CITED)]
      .map((match) => match[0])
      .filter((path) => !existsSync(join(repo, path)))
      .map((path) => `${document}: ${path}`),
  );
  assert.deepEqual(missing, []);
});

test("every relative link in the README and docs/ leads to a file or folder of the repository", () => {
  const missing = documents.flatMap((document) =>
    [...readFileSync(join(repo, document), "utf8").matchAll(LINK)]
      .map((match) => match[1]!)
      .filter((target) => !existsSync(resolve(repo, dirname(document), decodeURI(target))))
      .map((target) => `${document}: ${target}`),
  );
  assert.deepEqual(missing, []);
});
