/**
 * What a new user meets through Pi's own CLI (pinned Node, stub model on loopback, the extension
 * loaded with `-e`): no token, a token the server refuses, a broken config, and the language the
 * messages follow. Print mode has no UI, so the extension's messages arrive on stderr.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { readActivation, parseSessionLines } from "../../activation.ts";
import { dataDirFor } from "../../extension/config/config.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { REPO, describeRun, runPi, stubbedPiHome, type PiHome, type StubModel } from "../helpers/pi-cli.ts";
import { configureExtension, startWebhook, type Webhook } from "../../harness/webhook.ts";

const zh = messagesFor("zh-CN");
const en = messagesFor("en-US");

interface Cli {
  home: PiHome;
  model: StubModel;
  webhook: Webhook;
  dataDir: string;
  /** `pi -e <repo> -p --session <file> …` */
  pi(args: string[], env?: Record<string, string>): ReturnType<typeof runPi>;
  /** Runs a task that the stub answers; Pi writes the session file once it holds a reply. */
  task(task: string, env?: Record<string, string>): ReturnType<typeof runPi>;
  activation(): ReturnType<typeof readActivation>;
}

async function cli(t: TestContext, overrides: Record<string, unknown> = {}): Promise<Cli> {
  const webhook = await startWebhook();
  const { model, home } = await stubbedPiHome(t, () => webhook.close());
  configureExtension(home.root, webhook.endpoint, overrides);
  const session = join(home.root, "session.jsonl");
  const pi = (args: string[], env: Record<string, string> = {}) => runPi(home, ["-e", REPO, "-p", "--session", session, ...args], { env });
  return {
    home,
    model,
    webhook,
    dataDir: dataDirFor(home.agentDir),
    pi,
    task: async (task, env) => {
      model.script({ text: `done: ${task}` });
      const run = await pi([task], env);
      assert.equal(run.code, 0, describeRun(run));
      return run;
    },
    activation: () => readActivation(parseSessionLines(readFileSync(session, "utf8"))),
  };
}

/** How often `needle` occurs in `text`. */
const count = (text: string, needle: string) => text.split(needle).length - 1;

test("through Pi's CLI, /anon-notify without a token file refuses to switch on and says which file to create and where the server printed its token", async (t) => {
  const c = await cli(t);
  const tokenFile = join(c.dataDir, "token");
  rmSync(tokenFile);
  await c.task("task zero");
  const on = await c.pi(["/anon-notify"]);
  assert.equal(on.code, 0, describeRun(on));
  assert.ok(on.stderr.includes(zh.toggle.noToken(tokenFile)), describeRun(on));
  assert.match(on.stderr, /npm start/);
  assert.equal(c.activation().record, "none", "nothing was switched on");

  // The same refusal in English when the locale asks for it.
  const english = await c.pi(["/anon-notify"], { LANG: "en_US.UTF-8" });
  assert.ok(english.stderr.includes(en.toggle.noToken(tokenFile)), describeRun(english));
});

test("through Pi's CLI, a token the server refuses is said once, as such, not by heartbeat, claim and notice each", async (t) => {
  const c = await cli(t);
  await c.task("task zero");
  const on = await c.pi(["/anon-notify"]);
  assert.equal(c.activation().active, true, describeRun(on));

  const tokenFile = join(c.dataDir, "token");
  writeFileSync(tokenFile, "a-token-the-server-never-issued", { mode: 0o600 });
  const run = await c.task("task one");
  const rejected = zh.session.tokenRejected(tokenFile);
  assert.equal(count(run.stderr, rejected), 1, describeRun(run));
  for (const other of [zh.presence.failed(""), zh.commands.claimFailed(""), "未送达（", "401 unauthorized"]) {
    assert.ok(!run.stderr.includes(other), `"${other}" is not reported besides the one message\n${describeRun(run)}`);
  }
  assert.equal(c.webhook.events.length, 0, "nothing got through");

  // Switched off and on again with the refused token: refused, with the reason said once.
  await c.pi(["/anon-notify"]);
  const again = await c.pi(["/anon-notify"]);
  assert.equal(count(again.stderr, rejected), 1, describeRun(again));
  assert.ok(again.stderr.includes(zh.toggle.tokenRejected), describeRun(again));
  assert.equal(c.activation().active, false, "not switched on with a refused token");
  assert.equal(readdirSync(join(c.dataDir, "outbox")).filter((file) => file.endsWith(".json")).length, 1, "the final waits in the outbox");
});

test("through Pi's CLI, /anon-notify with a broken config changes nothing and shows the file and the key; the config's language wins over the locale", async (t) => {
  const c = await cli(t);
  await c.task("task zero");
  await c.pi(["/anon-notify"]);
  assert.equal(c.activation().active, true);

  const userConfig = join(c.dataDir, "config.json");
  const config = JSON.parse(readFileSync(userConfig, "utf8")) as Record<string, unknown>;
  writeFileSync(userConfig, JSON.stringify({ ...config, language: "en-US", delivery: { maxAttempts: "three" } }));
  const off = await c.pi(["/anon-notify"], { LANG: "zh_CN.UTF-8" });
  assert.equal(off.code, 0, describeRun(off));
  assert.match(off.stderr, /The Anon notices config is invalid; nothing changed \(still on/, describeRun(off));
  assert.ok(off.stderr.includes(`${userConfig}: delivery.maxAttempts`), describeRun(off));
  assert.deepEqual(c.activation(), { record: "valid", active: true, via: "command" }, "the saved switch was not touched");
});
