/**
 * `--anon-notify-on` (what anon-notify-host passes) through Pi's real CLI: a session with no on/off
 * record starts switched on, written as `/anon-notify` writes it; a session its owner switched off
 * stays off when started with the flag again.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { ACTIVATION_CUSTOM_TYPE, START_ON_FLAG } from "../../activation.ts";
import { REPO, describeRun, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";
import { configureExtension, startWebhook } from "../../harness/webhook.ts";

test("--anon-notify-on switches a new session on from its start, and never switches back on one its owner switched off", async (t) => {
  const webhook = await startWebhook();
  const { model, home } = await stubbedPiHome(t, () => webhook.close());
  configureExtension(home.root, webhook.endpoint);
  const session = join(home.root, "session.jsonl");
  // The flag last: a boolean flag before the prompt would take it as its value.
  const pi = (args: string[]) => runPi(home, ["-e", REPO, "-p", "--session", session, ...args]);
  const ran = async (task: string, flag: boolean) => {
    model.script({ text: `done: ${task}` });
    const run = await pi(flag ? [task, `--${START_ON_FLAG}`] : [task]);
    assert.equal(run.code, 0, describeRun(run));
  };

  await ran("first task", true);
  const records = readFileSync(session, "utf8")
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line) as { type: string; customType?: string; data?: unknown })
    .filter((entry) => entry.type === "custom" && entry.customType === ACTIVATION_CUSTOM_TYPE)
    .map((entry) => entry.data);
  assert.deepEqual(records, [{ version: 1, active: true, via: "command" }]);

  const off = await pi(["/anon-notify"]);
  assert.equal(off.code, 0, describeRun(off));
  await ran("after the owner switched it off", true);
  await ran("on again by hand", false).then(() => pi(["/anon-notify"]));
  await ran("last task", false);
  // Every run has exited and flushed its outbox: these are all the notices there are.
  const events = await webhook.waitForEvents(2);
  assert.deepEqual(
    events.map((event) => event.body.task),
    ["first task", "last task"],
  );
});
