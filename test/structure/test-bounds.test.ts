/**
 * The `test*` scripts bound each test file (`--test-timeout`, per file in Node 22); a test's own
 * `timeout` must fit inside that bound, or the file's bound ends it first and its own never counts.
 */
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import { join } from "node:path";
import test from "node:test";

const repo = join(import.meta.dirname, "../..");
const scripts = (JSON.parse(readFileSync(join(repo, "package.json"), "utf8")) as { scripts: Record<string, string> }).scripts;

/** `--test-timeout` of an npm script, in ms. */
function fileBound(script: string): number {
  const match = /--test-timeout=(\d+)/.exec(scripts[script] ?? "");
  assert.ok(match, `npm run ${script} sets --test-timeout`);
  return Number(match[1]);
}

/** A literal such as `10 * 60_000`, or undefined when it is not one. */
function evaluate(expression: string): number | undefined {
  if (!/^[\d_\s*]+$/.test(expression)) return undefined;
  return expression.split("*").reduce((product, factor) => product * Number(factor.replace(/_/g, "").trim()), 1);
}

/** Every test's own bound, for the short (npm test) and the long (RELIABILITY=long) runs. */
function ownBounds(text: string): { short: number[]; long: number[] } {
  const short: number[] = [];
  const long: number[] = [];
  for (const [, value] of text.matchAll(/\btimeout: ([^,}]+)[,}]/g)) {
    const choice = /^LONG \? (.+) : (.+)$/.exec(value!.trim());
    const [ifLong, ifShort] = choice ? [evaluate(choice[1]!), evaluate(choice[2]!)] : [evaluate(value!), evaluate(value!)];
    if (ifShort !== undefined) short.push(ifShort);
    if (ifLong !== undefined) long.push(ifLong);
  }
  return { short, long };
}

test("a test's own bound is read from its options, the long and short branches apart", () => {
  assert.deepEqual(ownBounds('test("a", { timeout: 90_000 }, f); test("b", { timeout: LONG ? 4 * 60 * 60_000 : 10 * 60_000 }, g); x({ timeout: TIMEOUT });'), {
    short: [90_000, 600_000],
    long: [90_000, 14_400_000],
  });
});

test("every test's own bound fits in its file's bound, in npm test, test:compat and test:reliability", () => {
  const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard", "test/*.test.ts"], { cwd: repo, encoding: "utf8" })
    .split("\n")
    .filter((file) => file && file !== "test/structure/test-bounds.test.ts"); // its own examples are not bounds
  assert.ok(files.length > 50);
  const checks = [
    { script: "test", long: false, files },
    { script: "test:compat", long: false, files: files.filter((file) => file.startsWith("test/extension/")) },
    { script: "test:reliability", long: true, files: files.filter((file) => file.startsWith("test/reliability/")) },
  ];
  for (const { script, long, files: selected } of checks) {
    const bound = fileBound(script);
    for (const file of selected) {
      const own = ownBounds(readFileSync(join(repo, file), "utf8"))[long ? "long" : "short"];
      for (const ms of own) assert.ok(ms < bound, `${file}: a test allows itself ${ms} ms, but npm run ${script} ends the file at ${bound} ms`);
    }
  }
});
