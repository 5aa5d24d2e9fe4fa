/**
 * The console page on `npm start` (a child process, as a person runs it): the printed link's token
 * signs a connection in, a connection without it gets only the sign-in form's entry, Ctrl-C exits 0.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort } from "../../harness/koishi.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";
import { ConsoleSocket, printedConsoleLink } from "../helpers/console.ts";
import { agentApi } from "../../harness/agent-api.ts";
import { SIGN_OUT_LISTENER } from "../../server/console/index.ts";

test("npm start prints the page's sign-in link; its token signs a WebSocket in, none gets nothing; Ctrl-C with pages connected exits 0 without a TypeError", {
  timeout: 60_000,
}, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-console-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const server = await spawnStandalone(dataDir, await freePort());
  t.after(() => server.kill());
  const url = await printedConsoleLink(server);
  assert.equal(url.pathname, "/anon-notify");
  const tokenPath = join(dataDir, "console.token");
  assert.ok(server.output().includes(`登录 Token 文件：${tokenPath}`));
  assert.equal((await stat(tokenPath)).mode & 0o777, 0o600);
  const token = url.searchParams.get("token")!;
  assert.equal(token, (await readFile(tokenPath, "utf8")).trim());
  for (const other of ["token", "operator.token"]) assert.notEqual(token, (await readFile(join(dataDir, other), "utf8")).trim(), `distinct from ${other}`);

  const port = Number(url.port);
  const bare = await ConsoleSocket.open(port);
  assert.deepEqual(await bare.raw("anon-notify/timeline", {}), { error: "unauthorized" });
  const page = await ConsoleSocket.open(port, url.origin);
  assert.deepEqual(await page.signIn(token), { ok: true, value: { via: "token" } });
  await page.until((view) => view.actions.allowed, "the data after signing in");
  // The probe without the token (and without an Origin) still learns nothing: no data, no stored entry.
  for (let id = 1; id <= 30; id++) assert.deepEqual(await bare.raw("anon-notify/entry", { id }), { error: "unauthorized" }, `entry ${id}`);
  assert.equal(bare.view ?? null, null, "no data pushed to the probe");

  // Ctrl-C with both still connected.
  server.child.kill("SIGINT");
  await server.exited;
  assert.equal(server.child.exitCode, 0, server.output());
  assert.match(server.output(), /已停止。/);
  assert.doesNotMatch(server.output(), /TypeError|Unhandled|at .*console\/lib/);
});

test("before signing in, npm start's console socket carries only the page's entry: Koishi's schema and command list come with the token", {
  timeout: 60_000,
}, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-console-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const server = await spawnStandalone(dataDir, await freePort());
  t.after(() => server.stop());
  const url = await printedConsoleLink(server);
  const page = await ConsoleSocket.open(Number(url.port), url.origin);
  t.after(() => page.close());
  await waitUntil(() => page.store.entry, "the console's entry");
  // A call answered after the entry: every push of the connection's first refresh went out before it.
  assert.equal((await page.raw("ping")).value, "pong");
  const before = page.pushed.filter((message) => message.value !== null);
  const bytes = Buffer.byteLength(JSON.stringify(before));
  console.log(`before sign-in: ${bytes} bytes of data (${before.map((message) => message.key).join(", ")})`);
  assert.deepEqual(
    before.map((message) => message.key),
    ["entry"],
    "nothing but the entry",
  );
  const { _id, ...entries } = page.store.entry as Record<string, { files: string[] }>;
  assert.equal(Object.keys(entries).length, 1, "one entry: the page's own script");
  const [[key, entry]] = Object.entries(entries) as [[string, { files: string[] }]];
  assert.deepEqual(Object.keys(entry), ["files"]);
  for (const file of entry.files) assert.match(file, new RegExp(`^/@plugin-${key}/(index\\.js|style\\.css)$`));
  assert.doesNotMatch(JSON.stringify(page.pushed), /command:anon|intercept\.http/, "no command list, no config schema");

  assert.deepEqual(await page.signIn(url.searchParams.get("token")!), { ok: true, value: { via: "token" } });
  await page.until((view) => view.actions.allowed, "the page's data after signing in");
  const permissions = await waitUntil(() => page.store.permissions as string[] | undefined, "Koishi's command list after signing in");
  assert.ok(permissions.includes("command:anon.sessions"), permissions.join(", "));
  assert.ok(page.store.schema, "Koishi's config schema after signing in");
  // Signing out takes it away again.
  assert.deepEqual(await page.call(SIGN_OUT_LISTENER, {}), { ok: true, value: { signed_out: true } });
  await waitUntil(() => (page.store.schema === null && page.store.permissions === null && page.store.anonNotify === null) || undefined, "all of it taken away");
});

test("Ctrl-C while a Pi session holds a long poll and keeps a connection alive still exits 0, bounded", { timeout: 60_000 }, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-stop-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const server = await spawnStandalone(dataDir, await freePort());
  t.after(() => server.kill());
  const api = agentApi({ baseUrl: server.baseUrl, token: (await readFile(join(dataDir, "token"), "utf8")).trim() });
  assert.equal((await api.heartbeat()).status, 200);
  // Held by the server until an instruction comes or the wait ends; the stop must not wait for it.
  const held = Promise.all(
    (["instructions", "control"] as const).map((lane) => api.claim("s-1", "r-1", { waitMs: 25_000, lane }).catch((error: unknown) => error)),
  );
  await new Promise((resolve) => setTimeout(resolve, 300)); // let the poll reach the server; the stop's outcome is asserted, not this pause
  server.child.kill("SIGINT");
  await waitUntil(
    () => server.child.exitCode !== null || server.child.signalCode !== null,
    () => `npm start still running 20 s after Ctrl-C: ${server.output()}`,
    20_000,
  );
  assert.equal(server.child.exitCode, 0, server.output());
  await held;
});
