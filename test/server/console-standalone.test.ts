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
import { ConsoleSocket } from "../helpers/console.ts";

test("npm start prints the page's sign-in link; its token signs a WebSocket in, none gets nothing; Ctrl-C with pages connected exits 0 without a TypeError", { timeout: 60_000 }, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-console-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  const server = await spawnStandalone(dataDir, await freePort());
  t.after(() => server.kill());
  const link = await waitUntil(() => /控制台“Pi 会话”页面（打开此链接即登录）：(http:\/\/\S+)/.exec(server.output())?.[1], () => `the console link in: ${server.output()}`, 20_000);
  const url = new URL(link);
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

  // Ctrl-C with both still connected.
  server.child.kill("SIGINT");
  await server.exited;
  assert.equal(server.child.exitCode, 0, server.output());
  assert.match(server.output(), /已停止。/);
  assert.doesNotMatch(server.output(), /TypeError|Unhandled|at .*console\/lib/);
});
