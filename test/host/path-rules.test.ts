/**
 * Which folder a start job's project names: the rules on the real filesystem (folders, links in
 * and out of the roots, `..`, hidden names), one table; generated names never leave the roots.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, realpathSync, rmSync, symlinkSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import fc from "fast-check";
import { inside } from "../../host/path-rules.ts";
import { listProjects, locateProject, resolveRoots } from "../../host/projects.ts";

function tree(t: { after(fn: () => void): void }) {
  const base = realpathSync(mkdtempSync(join(tmpdir(), "anon-notify-roots-")));
  t.after(() => rmSync(base, { recursive: true, force: true }));
  const code = join(base, "code");
  const more = join(base, "more");
  const outside = join(base, "outside");
  for (const dir of [code, more, outside, join(code, "shop"), join(code, "shop", "src"), join(code, ".secret"), join(more, "blog")]) mkdirSync(dir);
  writeFileSync(join(code, "notes.txt"), "");
  symlinkSync(outside, join(code, "escape"));
  symlinkSync(join(code, "shop"), join(code, "shop-link"));
  symlinkSync(join(base, "nowhere"), join(code, "dangling"));
  symlinkSync(join(code, "shop"), join(more, "shop-elsewhere"));
  return { base, code, more, outside, roots: resolveRoots([code, more]) };
}

test("a project is one real folder directly under an allowed root, else refused with its reason", (t) => {
  const { code, more, roots } = tree(t);
  const rows: [string, string, string][] = [
    ["shop", "ok", join(code, "shop")],
    ["blog", "ok", join(more, "blog")],
    ["shop-link", "ok", join(code, "shop")],
    ["missing", "unknown_project", ""],
    ["notes.txt", "unknown_project", ""],
    ["dangling", "unknown_project", ""],
    ["escape", "root_not_allowed", ""],
    // A link into another allowed root still leaves its own root.
    ["shop-elsewhere", "root_not_allowed", ""],
    ["..", "root_not_allowed", ""],
    ["../outside", "root_not_allowed", ""],
    ["shop/../../outside", "root_not_allowed", ""],
    ["shop/src", "root_not_allowed", ""],
    [".secret", "root_not_allowed", ""],
    [".", "root_not_allowed", ""],
    ["", "root_not_allowed", ""],
    ["a\0b", "root_not_allowed", ""],
    ["..\\outside", "root_not_allowed", ""],
  ];
  for (const [name, expected, cwd] of rows) {
    const verdict = locateProject(name, roots);
    if (expected === "ok") assert.deepEqual(verdict.kind === "ok" && verdict.cwd, cwd, `${JSON.stringify(name)}: ${JSON.stringify(verdict)}`);
    else assert.deepEqual(verdict, { kind: "refuse", refusal: expected }, JSON.stringify(name));
  }
});

test("the listing the host registers holds exactly the projects a start may name", (t) => {
  const { roots } = tree(t);
  assert.deepEqual(
    listProjects(roots).map((p) => p.name),
    ["blog", "shop", "shop-link"],
  );
  for (const project of listProjects(roots)) assert.equal(locateProject(project.name, roots).kind, "ok", project.name);
});

test("no generated name resolves outside the roots", (t) => {
  const { roots } = tree(t);
  const segment = fc.constantFrom("..", ".", "shop", "escape", "shop-link", "shop-elsewhere", "outside", "src", "", "blog");
  const joined = fc.tuple(fc.array(segment, { minLength: 1, maxLength: 5 }), fc.constantFrom("/", "\\")).map(([parts, separator]) => parts.join(separator));
  const name = fc.oneof(joined, fc.string());
  fc.assert(
    fc.property(name, (candidate) => {
      const verdict = locateProject(candidate, roots);
      if (verdict.kind === "ok")
        assert.ok(
          roots.some((root) => inside(verdict.cwd, root.real)),
          `${JSON.stringify(candidate)} -> ${verdict.cwd}`,
        );
    }),
    { numRuns: 500 },
  );
});
