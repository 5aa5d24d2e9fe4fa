/**
 * The console page's sign-in without plugin-auth, through the console's real WebSocket: nothing without the token, what it
 * opens, the trail's sign-in, signing out, a new token signing every page out, the plugin's own token file.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, statSync } from "node:fs";
import { join } from "node:path";
import type { AuditEntry } from "../../protocol/audit.ts";
import { SIGN_IN_LISTENER, SIGN_OUT_LISTENER } from "../../server/console/index.ts";
import type { ConsoleSession, TimelineItem } from "../../server/console/decisions.ts";
import { consoleStage } from "../helpers/console.ts";
import { waitUntil } from "../../harness/wait.ts";

function sessionIn(sessions: ConsoleSession[], sessionId: string) {
  return sessions.find((session) => session.session_id === sessionId);
}

test("without plugin-auth, a local process without the console token learns nothing through the WebSocket; with it, it sees and acts, and the trail names the sign-in", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t);
  const owner = await stage.openSignedIn();
  const { sessionId } = await stage.openPi();
  await owner.until((view) => sessionIn(view.sessions, sessionId), "the session on the owner's page");
  const secret = "deploy with password hunter2-very-secret";
  const sent = await owner.call("anon-notify/send", { session_id: sessionId, instruction: secret });
  assert.ok(sent.ok, JSON.stringify(sent));

  // The probe: no token, no Origin (a script on this machine), every listener of the page.
  const probe = await stage.open();
  assert.equal((await probe.raw("ping")).value, "pong", "the console itself still answers");
  for (let id = 1; id <= 30; id++) assert.deepEqual(await probe.raw("anon-notify/entry", { id }), { error: "unauthorized" }, `entry ${id}`);
  const listeners = Object.keys((stage.koishi.app.get("console") as { listeners: object }).listeners).filter(
    (name) => name.startsWith("anon-notify/") && name !== SIGN_IN_LISTENER && name !== SIGN_OUT_LISTENER,
  );
  assert.deepEqual(await probe.call(SIGN_OUT_LISTENER, {}), { ok: true, value: { signed_out: false } }, "signing out opens nothing");
  assert.ok(listeners.length >= 8, `the page's listeners: ${listeners.join(", ")}`);
  for (const name of listeners)
    assert.deepEqual(
      await probe.raw(name, { session_id: sessionId, instruction: "rm -rf ~", id: 1, approval_id: "ap-1", decision: "approved" }),
      { error: "unauthorized" },
      name,
    );
  assert.deepEqual(await probe.signIn("0".repeat(64)), { ok: false, error: "bad_token" });
  assert.deepEqual(await probe.raw("anon-notify/timeline", {}), { error: "unauthorized" }, "a wrong token signs nothing in");
  assert.equal(probe.store.anonNotify ?? null, null, "no data pushed");
  assert.deepEqual(
    probe.pushed.filter((message) => message.key === "anonNotify" && message.value !== null),
    [],
    "never any data",
  );
  assert.ok(!JSON.stringify(probe.pushed).includes("hunter2"), "nothing of the instruction");

  // With the token: the data, and actions.
  assert.deepEqual(await probe.signIn(stage.token), { ok: true, value: { via: "token" } });
  const view = await probe.until((current) => sessionIn(current.sessions, sessionId) && current, "the data after signing in");
  assert.deepEqual(view.actions, { allowed: true, via: "token" });
  const stop = await probe.call("anon-notify/stop", { session_id: sessionId });
  assert.ok(stop.ok, JSON.stringify(stop));

  // The trail says which sign-in acted.
  const trail = await owner.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { kind: "console", limit: 20 });
  assert.ok(trail.ok);
  const signIns = trail.value.entries.filter((item) => item.action === "console.sign_in");
  assert.equal(signIns.length, 2, "the owner's and the probe's sign-ins, not the refused one");
  const stopRow = trail.value.entries.find((item) => item.action === "console.stop")!;
  const full = await owner.call<AuditEntry>("anon-notify/entry", { id: stopRow.id });
  assert.ok(full.ok);
  const signIn = (full.value.data.client as { sign_in: { id: string; generation: string } }).sign_in;
  assert.equal(signIn.id, signIns[0]!.subject, "the stop names the probe's (newest) sign-in");
  assert.match(signIn.generation, /^[0-9a-f]{8}$/, "which token generation");
  assert.ok(!JSON.stringify(full.value).includes(stage.token), "never the token itself");
});

test("signing out ends that connection's sign-in alone: its data goes, its calls are refused, another page stays", { timeout: 60_000 }, async (t) => {
  const stage = await consoleStage(t);
  const leaving = await stage.openSignedIn();
  const staying = await stage.openSignedIn();
  await leaving.until((view) => view.actions.allowed, "the data");
  assert.deepEqual(await leaving.call(SIGN_OUT_LISTENER, {}), { ok: true, value: { signed_out: true } });
  await waitUntil(() => leaving.store.anonNotify === null || undefined, "the page's data taken away");
  assert.deepEqual(await leaving.raw("anon-notify/timeline", {}), { error: "unauthorized" });
  assert.deepEqual(await leaving.call(SIGN_OUT_LISTENER, {}), { ok: true, value: { signed_out: false } }, "nothing left to sign out");
  assert.ok((await staying.call("anon-notify/timeline", {})).ok, "the other page is still signed in");
  assert.ok(staying.view?.actions.allowed);
  // The same connection signs in again with the token.
  assert.deepEqual(await leaving.signIn(stage.token), { ok: true, value: { via: "token" } });
  await leaving.until((view) => view.actions.allowed, "the data again");
});

test("a new console token signs every page out: the old token is refused after the restart", { timeout: 60_000 }, async (t) => {
  const stage = await consoleStage(t);
  const page = await stage.openSignedIn();
  await page.until((view) => view.actions, "the data");
  await stage.restart({ consoleToken: "b".repeat(64) });
  const again = await stage.open();
  assert.deepEqual(await again.signIn(stage.token), { ok: false, error: "bad_token" });
  assert.deepEqual(await again.raw("anon-notify/timeline", {}), { error: "unauthorized" });
  assert.deepEqual(await again.signIn("b".repeat(64)), { ok: true, value: { via: "token" } });
});

test("the plugin loaded without a console token makes its own (0600, in its data folder, never logged) and signs in with it", {
  timeout: 30_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleToken: "" } });
  const path = join(stage.koishi.dataDir, "data", "notify-webhook", "console.token");
  assert.equal(statSync(path).mode & 0o777, 0o600);
  const token = readFileSync(path, "utf8").trim();
  assert.equal(token.length, 64);
  const page = await stage.open();
  assert.deepEqual(await page.signIn(stage.token), { ok: false, error: "bad_token" }, "not the harness's token");
  assert.deepEqual(await page.raw("anon-notify/timeline", {}), { error: "unauthorized" });
  assert.deepEqual(await page.signIn(token), { ok: true, value: { via: "token" } });
  await page.until((view) => view.actions.allowed, "the data after signing in with the file's token");
});
