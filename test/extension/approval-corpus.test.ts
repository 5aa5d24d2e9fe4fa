/** The everyday corpus (test/fixtures/everyday-session.txt): strict mode never asks less than rules mode, and an allow list only ever removes asks. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { corpusAsks, corpusCommands } from "../../scripts/approval-corpus.ts";

test("the everyday corpus: 150+ commands; strict asks for all that rules does, a typical allow list asks less, never more", async () => {
  assert.ok(corpusCommands().length >= 150, "a session's worth of commands");
  const asks = await corpusAsks();
  const empty = new Set(asks["strict, empty allow list"]);
  const typical = new Set(asks["strict, typical allow list"]);
  for (const command of asks.rules) assert.ok(typical.has(command), `rules mode asks, strict does not: ${command}`);
  for (const command of typical) assert.ok(empty.has(command), `an allow list added an ask: ${command}`);
  assert.ok(typical.size < empty.size, "the typical allow list lets its commands run");
  // The read-only half of the session runs unasked in strict mode.
  for (const command of ["ls -la", "git status", 'rg -n "useState" src', "sed -n '1,80p' src/api/routes.ts", "git diff | head -100"])
    assert.ok(!empty.has(command), `asked: ${command}`);
});
