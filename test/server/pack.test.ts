/** Both packages packed as npm publishes them, installed into a Koishi folder made as the README says; Koishi's CLI
 * starts from the README's koishi.yml (English first in i18n.locales) and says, in English, that notices have no
 * persona; an event gets a 202 and a receipt that fails saying so. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { randomBytes } from "node:crypto";
import { mkdir, mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import type { HealthAnswer } from "../../protocol/status.ts";
import { API_BASE_PATH, LIMITS } from "../../protocol/wire.ts";
import { freePort } from "../../harness/koishi.ts";
import { validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

const run = promisify(execFile);
const repo = resolve(import.meta.dirname, "../..");
const PLUGIN_DIR = join(repo, "packages", "koishi-plugin-notify-webhook");

interface Manifest {
  name: string;
  version: string;
  main: string;
  koishi?: { description?: Record<string, string>; service?: { required?: string[]; optional?: string[] } };
}

/** `npm pack` in `dir` into `destination`; the tarball's path and its file list. */
async function pack(dir: string, destination: string): Promise<{ tarball: string; files: string[] }> {
  const { stdout } = await run("npm", ["pack", "--silent", "--pack-destination", destination], { cwd: dir }).catch(
    (error: { stdout?: string; stderr?: string }) => {
      // tsc reports build errors on stdout.
      throw new Error(`npm pack in ${dir} failed:\n${error.stdout ?? ""}${error.stderr ?? ""}`);
    },
  );
  const tarball = join(destination, stdout.trim().split("\n").at(-1)!);
  const { stdout: listing } = await run("tar", ["-tzf", tarball]);
  return { tarball, files: listing.trim().split("\n") };
}

test("both packed packages install into a Koishi instance, which loads the plugin by its name and accepts an event", async (t) => {
  const work = await mkdtemp(join(tmpdir(), "anon-notify-pack-"));
  t.after(() => rm(work, { recursive: true, force: true }));

  const piPackage = await pack(repo, work);
  // Pi Web reads the dormant activation projection from here: Node strips no types under node_modules.
  assert.ok(piPackage.files.includes("package/dist/activation.js"));
  assert.ok(piPackage.files.includes("package/dist/host/cli.js"), "the anon-notify-host bin");
  assert.ok(piPackage.files.includes("package/index.ts"), "the extension");
  assert.ok(piPackage.files.includes("package/config.schema.json"), "the config files' JSON Schema, for editors");
  assert.ok(!piPackage.files.some((file) => file.startsWith("package/packages/")), "the plugin package is not inside the Pi package");

  const plugin = await pack(PLUGIN_DIR, work);
  assert.ok(plugin.files.includes("package/lib/server/notify-webhook.js"));
  assert.ok(plugin.files.includes("package/lib/protocol/wire.js"));
  assert.ok(plugin.files.includes("package/console/dist/index.js"), "the console page");
  for (const [{ files }, root] of [
    [piPackage, "dist"],
    [plugin, "lib"],
  ] as const) {
    for (const locale of ["zh-CN", "en-US"])
      assert.ok(files.includes(`package/${root}/server/locales/${locale}.yml`), `the chat texts (${locale}) in ${root}/`);
  }
  for (const { files } of [piPackage, plugin]) {
    assert.ok(!files.some((file) => /^package\/(test|bench|data|\.tmp)\//.test(file) || file.endsWith(".test.ts")), "no tests or data");
  }
  const manifest = JSON.parse(await readFile(join(PLUGIN_DIR, "package.json"), "utf8")) as Manifest;
  const piManifest = JSON.parse(await readFile(join(repo, "package.json"), "utf8")) as Manifest;
  assert.match(manifest.name, /^(@[^/]+\/)?koishi-plugin-/, "a name Koishi's loader and market find");
  assert.equal(manifest.version, piManifest.version, "released together");
  assert.ok(manifest.koishi?.description?.zh && manifest.koishi.description.en, "market descriptions in Chinese and English");
  assert.deepEqual(manifest.koishi?.service?.required, ["server", "database"]);
  for (const optional of ["console", "yesimbot.agent", "yesimbot.tool"]) assert.ok(manifest.koishi?.service?.optional?.includes(optional), optional);

  const instance = join(work, "instance");
  await mkdir(instance, { recursive: true });
  await writeFile(join(instance, "package.json"), JSON.stringify({ name: "koishi-instance", private: true }));
  // A real instance: Koishi installed in it (its loader resolves plugin names from its own place),
  // at the versions this repository tests.
  const instanceDeps = await Promise.all(
    ["koishi", "@koishijs/plugin-server", "@minatojs/driver-sqlite"].map(async (name) => {
      const { version } = JSON.parse(await readFile(join(repo, "node_modules", name, "package.json"), "utf8")) as Manifest;
      return `${name}@${version}`;
    }),
  );
  await run("npm", ["install", "--prefer-offline", "--no-audit", "--no-fund", "--ignore-scripts", ...instanceDeps, piPackage.tarball, plugin.tarball], {
    cwd: instance,
  });

  // The README's own steps after the install: its folder, then its koishi.yml with only the placeholders filled in.
  const readme = await readFile(join(repo, "README.md"), "utf8");
  const section = readme.slice(readme.indexOf("### Into an existing Koishi"));
  const install = /```bash\n([\s\S]*?)```/.exec(section)![1]!;
  assert.match(install, /^mkdir -p data\b/m, "the README creates the database folder");
  await mkdir(join(instance, "data"));
  const port = await freePort();
  const token = randomBytes(16).toString("hex");
  const documented = /```yaml\n([\s\S]*?)```/.exec(section)![1]!;
  assert.match(documented, /path: \.\/data\/koishi\.db/);
  assert.doesNotMatch(documented, /logPersona/, "the documented config has no log persona");
  await writeFile(
    join(instance, "koishi.yml"),
    documented
      .replace("port: 5140", `port: ${port}`)
      .replace("<the token on the Pi side>", token)
      .replace("<Anon's QQ>", "20002")
      .replace("<your QQ>", "10001"),
  );
  assert.doesNotMatch(await readFile(join(instance, "koishi.yml"), "utf8"), /</, "every placeholder filled");

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
  const health = await waitUntil(
    async () => {
      const response = await fetch(`${baseUrl}/health`, { headers }).catch(() => undefined);
      const body = await response?.text();
      return response?.status === 200 ? (JSON.parse(body!) as HealthAnswer) : undefined;
    },
    "Koishi answering /health",
    30_000,
  ).catch((error: Error) => {
    throw new Error(`${error.message}; Koishi's output:\n${output}`);
  });
  assert.equal(health.version, manifest.version, "the plugin knows its own package");
  assert.match(output, /apply plugin @cr1ms0n\/notify-webhook/, "loaded by its name");
  // No YesImBot, no log persona, and the bot's adapter not installed: the server says where notices go, at start and in /health.
  assert.deepEqual(health.notices, { route: "direct", ready: false, reason: "bot_not_found" });
  assert.equal(health.chat, false);
  // The README's koishi.yml puts en-US first in i18n.locales: the plugin's log and receipts are in English.
  assert.match(documented, /^i18n:\n {2}locales: \[en-US, zh-CN\]/m);
  await waitUntil(
    () => (output.includes("There is no persona (YesImBot v3 not found, logPersona off)") ? true : undefined),
    () => `the start-up warning in Koishi's log:\n${output}`,
  );

  const event = validEvent();
  const accepted = await fetch(`${baseUrl}/events`, { method: "POST", headers, body: JSON.stringify(event) });
  assert.equal(accepted.status, 202);
  assert.deepEqual(await accepted.json(), { event_id: event.event_id, state: "queued", duplicate: false, batch_max: LIMITS.eventBatchMax });
  const receipt = await waitUntil(
    async () => {
      const answer = (await (await fetch(`${baseUrl}/events/${encodeURIComponent(String(event.event_id))}`, { headers })).json()) as {
        state: string;
        error: string | null;
      };
      return answer.state === "failed" ? answer : undefined;
    },
    "the event failing for want of a persona",
    30_000,
  );
  assert.match(receipt.error ?? "", /^no_persona: No persona is available/);
  assert.doesNotMatch(output, /\p{Script=Han}/u, "no Chinese in Koishi's log");
});
