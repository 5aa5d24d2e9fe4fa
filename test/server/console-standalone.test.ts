/**
 * The console page on `npm start` (a child process, as a person runs it): the printed link carries
 * the console token that signs a connection in, the bare connection gets nothing, and Ctrl-C with
 * pages still connected stops cleanly with exit code 0.
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
