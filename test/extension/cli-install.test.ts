/**
 * Installing only the extension with Pi's own `pi install`, from each kind of source, into a temp
 * agent folder, then checking that Pi starts with it loaded: a session switched on with
 * `/anon-notify` notifies a loopback webhook when its next task completes.
 *
 * What Pi does per source (both versions): a local path is recorded in settings.json as is, with no
 * npm run, so the folder needs its own node_modules; an npm source runs `npm install <spec> --prefix
 * <agent>/npm --legacy-peer-deps`; a git source clones and runs `npm install --omit=dev` in the clone.
 * npm runs with prefer-offline: packages come from npm's cache, or from the registry when missing.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFileSync } from "node:fs";
import { copyFile, mkdir, readdir, readFile } from "node:fs/promises";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { dirname, join, normalize } from "node:path";
import { promisify } from "node:util";
import { REPO, describeRun, lastUserText, runPi, stubbedPiHome, type PiHome, type StubModel } from "../helpers/pi-cli.ts";
import { configureExtension, startWebhook } from "../../harness/webhook.ts";

const run = promisify(execFile);
const PREFER_OFFLINE = { npm_config_prefer_offline: "true" };
/**
 * What the package needs at run time: its `dependencies` and theirs (optional peers are not installed), read from the
 * installed tree. Pi itself provides its own packages and typebox; nothing from devDependencies may come along.
 */
const RUNTIME_DEPENDENCIES = runtimeClosure();

function runtimeClosure(): string[] {
  const seen = new Set<string>();
  const visit = (manifest: string) => {
    const { dependencies = {} } = JSON.parse(readFileSync(manifest, "utf8")) as { dependencies?: Record<string, string> };
    for (const name of Object.keys(dependencies)) {
      if (seen.has(name)) continue;
      seen.add(name);
      visit(join(REPO, "node_modules", name, "package.json"));
    }
  };
  visit(join(REPO, "package.json"));
  return [...seen].sort();
}
const INSTALL_TIMEOUT_MS = 180_000;

async function setup(t: TestContext) {
  const { model, home } = await stubbedPiHome(t);
  return { model, home };
}

/** The repository as a fresh clone of this working tree would have it: the tracked files, nothing installed. */
async function freshClone(dest: string): Promise<string> {
  const { stdout } = await run("git", ["ls-files", "-z"], { cwd: REPO });
  for (const file of stdout.split("\0").filter(Boolean)) {
    await mkdir(dirname(join(dest, file)), { recursive: true });
    await copyFile(join(REPO, file), join(dest, file)).catch((error: NodeJS.ErrnoException) => {
      // Deleted in the working tree but not yet committed.
      if (error.code !== "ENOENT") throw error;
    });
  }
  return dest;
}

/** Every package name installed below `dir`, nested ones included: npm hoists differently with and without a lock. */
async function installed(dir: string): Promise<string[]> {
  const names = new Set<string>();
  const walk = async (modules: string) => {
    const entries = await readdir(modules).catch((error: NodeJS.ErrnoException) => (error.code === "ENOENT" ? [] : Promise.reject(error)));
    for (const entry of entries) {
      if (entry.startsWith(".")) continue;
      const packages = entry.startsWith("@") ? (await readdir(join(modules, entry))).map((scoped) => `${entry}/${scoped}`) : [entry];
      for (const name of packages) {
        names.add(name);
        await walk(join(modules, name, "node_modules"));
      }
    }
  };
  await walk(join(dir, "node_modules"));
  return [...names].sort();
}

async function piInstall(home: PiHome, source: string): Promise<void> {
  const result = await runPi(home, ["install", source], { env: PREFER_OFFLINE, timeoutMs: INSTALL_TIMEOUT_MS });
  assert.equal(result.code, 0, describeRun(result));
}

/** Pi, started as the user would after installing, loads the extension and it notifies. */
async function assertNotifies(t: TestContext, home: PiHome, model: StubModel): Promise<void> {
  const webhook = await startWebhook();
  t.after(() => webhook.close());
  configureExtension(home.root, webhook.endpoint);
  const session = join(home.root, "session.jsonl");
  const pi = async (prompt: string) => {
    const result = await runPi(home, ["-p", "--session", session, prompt]);
    assert.equal(result.code, 0, describeRun(result));
  };
  model.script({ text: "first" });
  await pi("task zero");
  // Without the extension, Pi would send the command to the model as a prompt.
  await pi("/anon-notify");
  assert.deepEqual(model.requests.map(lastUserText), ["task zero"], "the extension handled /anon-notify");
  model.script({ text: "second" });
  await pi("task one");
  const [event] = await webhook.waitForEvents(1);
  assert.deepEqual([event!.body.status, event!.body.task], ["completed", "task one"]);
}

test("local path: Pi installs nothing for it; after `npm install --omit=dev` (only the runtime dependencies) the clone loads", async (t) => {
  const { model, home } = await setup(t);
  const clone = await freshClone(join(home.root, "anon-notify"));
  await piInstall(home, clone);

  const missing = await runPi(home, ["-p", "hello"]);
  assert.equal(missing.code, 1, describeRun(missing));
  assert.match(missing.stderr, /Cannot find module '(zod|undici)'/);

  await run("npm", ["install", "--omit=dev", "--no-audit", "--no-fund", "--prefer-offline"], { cwd: clone, env: home.env, timeout: INSTALL_TIMEOUT_MS });
  assert.deepEqual(await installed(clone), RUNTIME_DEPENDENCIES);
  await assertNotifies(t, home, model);
});

test("npm source: `pi install npm:@cr1ms0n/anon-notify@file:<tarball>` installs the package with its runtime dependencies only, and it loads", async (t) => {
  const { model, home } = await setup(t);
  const clone = await freshClone(join(home.root, "anon-notify"));
  // The extension ships as TypeScript; the build (prepack) only adds the server's dist/.
  const { stdout } = await run("npm", ["pack", "--ignore-scripts", "--silent", "--pack-destination", home.root], { cwd: clone, env: home.env });
  const { name } = JSON.parse(await readFile(join(clone, "package.json"), "utf8")) as { name: string };
  await piInstall(home, `npm:${name}@file:${join(home.root, stdout.trim())}`);
  assert.deepEqual(await installed(join(home.agentDir, "npm")), [name, ...RUNTIME_DEPENDENCIES].sort());
  await assertNotifies(t, home, model);
});

test("git source: `pi install git:<url>` clones, installs its runtime dependencies only, and it loads", async (t) => {
  const { model, home } = await setup(t);
  const clone = await freshClone(join(home.root, "anon-notify"));
  const git = (args: string[], cwd: string) => run("git", ["-c", "user.name=test", "-c", "user.email=test@example.invalid", ...args], { cwd });
  await git(["init", "--quiet"], clone);
  await git(["add", "--all"], clone);
  await git(["commit", "--quiet", "-m", "snapshot"], clone);
  // Pi takes a git URL's path as owner/repository, as on a forge.
  const bare = join(home.root, "served", "cr1ms0n", "anon-notify.git");
  await git(["clone", "--quiet", "--bare", clone, bare], home.root);
  await git(["update-server-info"], bare);
  // git's "dumb" HTTP protocol: plain files from the bare repository.
  const server = createServer(async (request, response) => {
    const path = normalize(decodeURIComponent(new URL(request.url ?? "/", "http://x").pathname));
    try {
      const body = await readFile(join(home.root, "served", path));
      response.writeHead(200).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((listening) => server.listen(0, "127.0.0.1", listening));
  t.after(() => new Promise<void>((closed) => server.close(() => closed())));
  const { port } = server.address() as AddressInfo;

  await piInstall(home, `git:http://127.0.0.1:${port}/cr1ms0n/anon-notify.git`);
  const checkout = join(home.agentDir, "git", "127.0.0.1", "cr1ms0n", "anon-notify");
  assert.deepEqual(await installed(checkout), RUNTIME_DEPENDENCIES);
  await assertNotifies(t, home, model);
});
