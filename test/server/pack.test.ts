/**
 * The packed package works as a Koishi plugin: `npm pack` (which builds dist/ in prepack), install
 * the tarball into a temp Koishi instance folder (from npm's cache where it can, the registry otherwise), start it with Koishi's
 * own CLI and loader from a `koishi.yml`, and get a 202 and an injected receipt.
 * Koishi itself, plugin-server, the SQLite driver and js-yaml (Koishi's loader brings it) are linked
 * from this repository's node_modules.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readdir, rm, symlink, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { promisify } from "node:util";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { freePort } from "../../harness/koishi.ts";
import { eventually, validEvent } from "../../harness/event-client.ts";

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");
const PACKAGE_DIR = "node_modules/@cr1ms0n/anon-notify";

test("the packed tarball loads through Koishi's loader and accepts an event", async (t) => {
  const work = await mkdtemp(join(tmpdir(), "anon-notify-pack-"));
  t.after(() => rm(work, { recursive: true, force: true }));

  await run("npm", ["pack", "--silent", "--pack-destination", work], { cwd: repo }).catch((error: { stdout?: string; stderr?: string }) => {
    // tsc reports build errors on stdout.
    throw new Error(`npm pack failed:\n${error.stdout ?? ""}${error.stderr ?? ""}`);
  });
  const tarball = (await readdir(work)).find((name) => name.endsWith(".tgz"));
  assert.ok(tarball, "npm pack produced a tarball");
  const { stdout: listing } = await run("tar", ["-tzf", join(work, tarball)]);
  const files = listing.trim().split("\n");
  assert.ok(files.includes("package/dist/server/notify-webhook.js"));
  assert.ok(files.includes("package/dist/protocol/wire.js"));
  assert.ok(files.includes("package/dist/server/locales/zh-CN.yml") && files.includes("package/dist/server/locales/en-US.yml"), "the chat texts");
  // Pi Web reads the dormant activation projection from here: Node strips no types under node_modules.
  assert.ok(files.includes("package/dist/activation.js"));
  assert.ok(!files.some((file) => /^package\/(test|bench|data|\.tmp)\//.test(file) || file.endsWith(".test.ts")), "no tests or data");

  const instance = join(work, "instance");
  await mkdir(join(instance, "data"), { recursive: true });
  await writeFile(join(instance, "package.json"), JSON.stringify({ name: "koishi-instance", private: true }));
  await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", join(work, tarball)], { cwd: instance });
  // js-yaml comes with Koishi's loader in a real Koishi install; here Koishi itself is linked.
  for (const name of ["koishi", "@koishijs/plugin-server", "@minatojs/driver-sqlite", "js-yaml"]) {
    await mkdir(dirname(join(instance, "node_modules", name)), { recursive: true });
    await symlink(join(repo, "node_modules", name), join(instance, "node_modules", name), "dir");
  }

  const port = await freePort();
  const token = randomBytes(16).toString("hex");
  await writeFile(
    join(instance, "koishi.yml"),
    [
      "plugins:",
      "  server:",
      "    host: 127.0.0.1",
      `    port: ${port}`,
      "  ./node_modules/@minatojs/driver-sqlite:",
      "    path: ./data/koishi.db",
      `  ./${PACKAGE_DIR}/dist/server/notify-webhook.js:`,
      `    token: ${token}`,
      "    logPersona: true",
      "",
    ].join("\n"),
  );

  const koishiCli = spawn(process.execPath, [join(instance, "node_modules/koishi/lib/cli/index.js"), "start"], {
    cwd: instance,
    detached: true,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  koishiCli.stdout.on("data", (chunk) => (output += chunk));
  koishiCli.stderr.on("data", (chunk) => (output += chunk));
  const exited = new Promise((resolveExit) => koishiCli.once("exit", resolveExit));
  t.after(async () => {
    // The CLI runs the app in a worker process; stop the whole group.
    process.kill(-koishiCli.pid!, "SIGTERM");
    await exited;
  });

  const baseUrl = `http://127.0.0.1:${port}${API_BASE_PATH}`;
  const headers = { authorization: `Bearer ${token}` };
  await eventually(async () => {
    const response = await fetch(`${baseUrl}/health`, { headers }).catch(() => undefined);
    await response?.arrayBuffer();
    return response?.status === 200 ? true : undefined;
  }, `Koishi answering /health (output: ${output})`, 1500);

  const event = validEvent();
  const accepted = await fetch(`${baseUrl}/events`, { method: "POST", headers, body: JSON.stringify(event) });
  assert.equal(accepted.status, 202);
  assert.deepEqual(await accepted.json(), { event_id: event.event_id, state: "queued", duplicate: false });
  const receipt = await eventually(async () => {
    const answer = (await (await fetch(`${baseUrl}/events/${encodeURIComponent(String(event.event_id))}`, { headers })).json()) as { state: string };
    return answer.state === "context_injected" ? answer : undefined;
  }, "event injected by the log persona");
  assert.equal(receipt.state, "context_injected");
  assert.match(output, /\[EXTERNAL_AUTOMATION_EVENT\]/);
});
