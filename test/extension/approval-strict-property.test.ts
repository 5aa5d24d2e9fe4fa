/**
 * Strict mode over generated commands whose safety is known by construction (strict-commands.ts):
 * no line holding a dangerous command runs without a person, in either shape of the call, and
 * every everyday read-only line runs unasked. Fixed seed here; `npm run test:reliability` runs it long.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { matchCall, type PolicySettings } from "../../extension/approvals/policy-rules.ts";
import { loadShell } from "../../extension/approvals/shell-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { dangerousLine, safeLine } from "./strict-commands.ts";

const words = messagesFor("en-US").approvals.actions;
const read = await loadShell();
const place = { cwd: "/home/u/proj", home: "/home/u", tempDirs: ["/tmp"] };
const strict: PolicySettings = { mode: "strict", allow: [], disabledRules: [], rules: [], grantableRules: [] };
/** A typical allow list, narrow enough to widen nothing a dangerous line needs (`["make"]` alone would allow `make -f -`). */
const typical: PolicySettings = {
  ...strict,
  allow: [
    ["npm", "test"],
    ["npm", "run", "build"],
    ["git", "add"],
    ["git", "commit"],
    ["python3", "-m", "pytest"],
    ["make", "test"],
  ],
};

const LONG = process.env.RELIABILITY === "long";
const runs = (short: number) => (LONG ? short * 50 : short);
/** Fixed in `npm test`; the long run takes a new one each time (printed, and `STRICT_SEED` replays it). */
const seed = Number(process.env.STRICT_SEED ?? (LONG ? Date.now() % 1_000_000_007 : 20261202));
if (LONG) console.log(`strict-mode property seed: ${seed}`);
const asks = (command: string, settings: PolicySettings) => matchCall({ tool: "bash", input: { command } }, place, settings, read, words) !== undefined;

test("strict mode: no generated dangerous line runs without a person", () => {
  fc.assert(
    fc.property(dangerousLine, (line) => {
      assert.ok(asks(line, strict), `ran unasked: ${JSON.stringify(line)}`);
      assert.ok(asks(line, typical), `ran unasked with the typical allow list: ${JSON.stringify(line)}`);
    }),
    { numRuns: runs(3000), seed },
  );
});

test("strict mode stays usable: every generated everyday read-only line runs unasked", () => {
  fc.assert(
    fc.property(safeLine, (line) => {
      assert.equal(asks(line, strict), false, `asked: ${JSON.stringify(line)}`);
    }),
    { numRuns: runs(1000), seed },
  );
});
