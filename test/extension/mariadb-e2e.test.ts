/**
 * One notice end to end on the database many Koishi instances run: a REAL Pi session (SDK, faux
 * model) against the REAL plugin on a real MariaDB; the receipt is handed over and survives a restart.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { startKoishi } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";

test("a completed run's notice is stored on MariaDB, handed to the persona, and still there after a restart", { timeout: 180_000 }, async (t) => {
  const koishi = await startKoishi({ database: "mysql", config: { logPersona: true } });
  const root = makeRoot();
  configureExtension(root, `${koishi.baseUrl}/events`, {}, koishi.token);
  const pi = await startPi({ root });
  t.after(async () => {
    await pi.dispose();
    await koishi.stop();
    rmSync(root, { recursive: true, force: true });
  });

  await pi.prompt("/anon-notify");
  pi.script([ai.fauxAssistantMessage('done on MariaDB: <b>it</b> & "quotes" 😀')]);
  await pi.prompt("a task on MariaDB");
  let seen: unknown[] = [];
  const final = await waitUntil(
    async () => {
      const rows = await koishi.app.database.get(EVENT_TABLE, { status: "completed" });
      seen = rows.map((row) => [row.event_id, row.state, row.error]);
      return rows.find((row) => row.state === "context_injected");
    },
    () => `the final handed over: ${JSON.stringify(seen)}`,
    60_000,
  );
  assert.match(final.body, /done on MariaDB: <b>it<\/b> & \\"quotes\\" 😀/, "the body is stored as sent, 4-byte characters included");

  await koishi.restart();
  const receipt = await fetch(`${koishi.baseUrl}/events/${encodeURIComponent(final.event_id)}`, { headers: { authorization: `Bearer ${koishi.token}` } });
  assert.equal(receipt.status, 200);
  assert.equal(((await receipt.json()) as { state: string }).state, "context_injected");
});
