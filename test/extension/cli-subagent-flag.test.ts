/**
 * `--anon-notify-off` through Pi's real argument parsing: Pi's own CLI on the pinned Node, a stub
 * model on loopback, the extension loaded with `-e`, one session switched on and resumed by each run.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { SUBAGENT_ENV, SUBAGENT_FLAG } from "../../activation.ts";
import { swallowedByFlag } from "../../activation.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { REPO, describeRun, lastUserText, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";
import { configureExtension, startWebhook } from "../../harness/webhook.ts";

describe("which word Pi's parser takes as the flag's value", () => {
  const rows: [string, string[], string | undefined][] = [
    ["flag before the prompt", ["-p", "--anon-notify-off", "task"], "task"],
    ["flag after the prompt", ["-p", "task", "--anon-notify-off"], undefined],
    ["another option follows", ["--anon-notify-off", "--session", "s.jsonl", "task"], undefined],
    ["-- ends the options", ["--anon-notify-off", "--", "task"], undefined],
    ["after --, it is a message", ["--", "--anon-notify-off", "task"], undefined],
    ["a file argument follows", ["--anon-notify-off", "@plan.md"], undefined],
    ["with =value", ["--anon-notify-off=1", "task"], undefined],
    ["second occurrence swallows", ["--anon-notify-off", "-p", "--anon-notify-off", "task"], "task"],
    ["another flag's name", ["--anon-notify-offline", "task"], undefined],
  ];
  for (const [label, args, expected] of rows) {
    test(label, () => assert.equal(swallowedByFlag(args, SUBAGENT_FLAG), expected));
  }
});

test("through Pi's CLI, --anon-notify-off silences the run when placed safely, and a prompt it would swallow stops Pi with exit 1 instead of being lost", async (t) => {
  const webhook = await startWebhook();
  const { model, home } = await stubbedPiHome(t, () => webhook.close());
  configureExtension(home.root, webhook.endpoint);
  const session = join(home.root, "session.jsonl");
  const pi = async (args: string[], env: Record<string, string> = {}) => runPi(home, ["-e", REPO, "-p", "--session", session, ...args], { env });
  const ranTask = async (task: string, args: string[], env?: Record<string, string>) => {
    model.script({ text: `done: ${task}` });
    const run = await pi(args, env);
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(lastUserText(model.requests.at(-1)!), task, "the model was sent the task");
    assert.equal(run.stdout.trim(), `done: ${task}`, describeRun(run));
  };

  // Pi writes a session file once it holds a reply, so the switch-on needs a session with one.
  await ranTask("task zero", ["task zero"]);
  const on = await pi(["/anon-notify"]);
  assert.equal(on.code, 0, describeRun(on));
  await ranTask("task one", ["task one"]);
  await webhook.waitForEvents(1);

  await ranTask("flag last", ["flag last", `--${SUBAGENT_FLAG}`]);
  await ranTask("after --", [`--${SUBAGENT_FLAG}`, "--", "after --"]);
  await ranTask("by environment", ["by environment"], { [SUBAGENT_ENV]: "1" });

  const requestsBefore = model.requests.length;
  const swallowed = await pi([`--${SUBAGENT_FLAG}`, "swallowed task"]);
  assert.equal(swallowed.code, 1, describeRun(swallowed));
  assert.equal(model.requests.length, requestsBefore, "no model request for the refused invocation");
  assert.equal(swallowed.stdout, "", "the previous reply is not printed as if it answered the task");
  assert.ok(swallowed.stderr.includes(messagesFor("zh-CN").session.swallowedPrompt(SUBAGENT_FLAG, '"swallowed task"', SUBAGENT_ENV)), describeRun(swallowed));
  const english = await pi([`--${SUBAGENT_FLAG}`, "swallowed task"], { LANG: "en_US.UTF-8" });
  assert.ok(english.stderr.includes(messagesFor("en-US").session.swallowedPrompt(SUBAGENT_FLAG, '"swallowed task"', SUBAGENT_ENV)), describeRun(english));
  assert.doesNotMatch(english.stderr, /\p{Script=Han}/u, "one language: the English refusal holds no Chinese");

  await ranTask("task two", ["task two"]);
  // Every run has exited and flushed its outbox on shutdown: these are all the notices there will be.
  const events = await webhook.waitForEvents(2);
  assert.deepEqual(
    events.map((event) => [event.body.status, event.body.task]),
    [
      ["completed", "task one"],
      ["completed", "task two"],
    ],
  );
});
