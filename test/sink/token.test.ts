import { test } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureSinkToken, readSinkToken } from "../../extension/sink/token.ts";

function tempRoot(t: { after: (fn: () => void) => void }): string {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-sink-token-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  return root;
}
const mode = (path: string) => statSync(path).mode & 0o777;

test("an absent token file is created with 32 random bytes as hex, mode 0600", (t) => {
  const file = join(tempRoot(t), "notify.token");
  const token = ensureSinkToken(file);
  assert.match(token, /^[0-9a-f]{64}$/);
  assert.equal(readFileSync(file, "utf8").trim(), token);
  assert.equal(mode(file), 0o600);
  assert.notEqual(ensureSinkToken(join(tempRoot(t), "other.token")), token, "tokens are random");
});

test("a missing folder is created 0700, with no temp file left behind", (t) => {
  const root = tempRoot(t);
  const folder = join(root, "VPet", "deeper");
  ensureSinkToken(join(folder, "notify.token"));
  assert.equal(mode(folder), 0o700);
  assert.deepEqual(readdirSync(folder), ["notify.token"]);
});

test("an existing folder keeps its mode", (t) => {
  const folder = join(tempRoot(t), "shared");
  mkdirSync(folder);
  chmodSync(folder, 0o755);
  ensureSinkToken(join(folder, "notify.token"));
  assert.equal(mode(folder), 0o755);
});

test("an existing token file is read, never overwritten, and its mode is left alone", (t) => {
  const file = join(tempRoot(t), "notify.token");
  writeFileSync(file, "app-made-token\n", { mode: 0o640 });
  chmodSync(file, 0o640);
  assert.equal(ensureSinkToken(file), "app-made-token");
  assert.equal(ensureSinkToken(file), "app-made-token");
  assert.equal(readFileSync(file, "utf8"), "app-made-token\n");
  assert.equal(mode(file), 0o640);
});

test("whoever creates the file first decides: a second creator reads the first one's token", (t) => {
  const file = join(tempRoot(t), "notify.token");
  const first = ensureSinkToken(file);
  assert.equal(ensureSinkToken(file), first);
});

test("an empty token file is a clear error, not an empty bearer", (t) => {
  const file = join(tempRoot(t), "notify.token");
  writeFileSync(file, "  \n");
  assert.throws(() => ensureSinkToken(file), /is empty/);
  assert.equal(readFileSync(file, "utf8"), "  \n", "the bad file is not replaced");
  assert.equal(readSinkToken(join(tempRoot(t), "absent.token")), undefined);
});
