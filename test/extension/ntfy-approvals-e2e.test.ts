/**
 * Approvals answered from the phone, end to end through real parts: a REAL Pi session (SDK, faux
 * model calling `bash` with `rm -rf build`) with this extension and approvals on, the REAL
 * notify-webhook plugin in Koishi (loopback, SQLite) with no chat bot, only the ntfy route, and a
 * loopback fake ntfy whose buttons are pressed as the phone presses them. The terminal dialog stays
 * open, so only the push answers.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { OPERATOR_TOKEN, call, startServer } from "../../harness/agent-api.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { ai, answerableTerminal, toolResults } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { confirmingDeployer } from "../helpers/dialog-tool.ts";
import { startFakeNtfy } from "../helpers/fake-ntfy.ts";

async function setup(t: TestContext) {
  const ntfy = await startFakeNtfy();
  t.after(() => ntfy.stop());
  const server = await startServer({ config: { ntfyUrl: ntfy.url, ntfyTopic: ntfy.topic, ntfyToken: ntfy.token } });
  await server.restart({ publicUrl: new URL(server.baseUrl).origin });
  const term = answerableTerminal();
  const pi = await piOnServer(t, server, { ui: term.ui, userConfig: { language: "zh-CN", approval: { enabled: true } } });
  await pi.prompt("/anon-notify");
  const build = join(pi.cwd, "build");
  mkdirSync(build, { recursive: true });
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好的")]);
  const run = pi.prompt("清理构建目录");
  const push = await waitUntil(() => ntfy.published.find((p) => /^Pi 审批 [A-Z]{5}$/.test(p.title ?? "")), "the approval request reached the phone", 30_000);
  assert.equal(push.priority, 5);
  assert.match(push.message!, /┃ rm -rf build/);
  assert.deepEqual(
    push.actions?.map((a) => [a.action, a.label]),
    [
      ["http", "批准"],
      ["http", "拒绝"],
    ],
  );
  const code = push.title!.slice(-5);
  return { ntfy, server, pi, term, build, run, push, code, sessionId: pi.session.sessionManager.getSessionId() };
}

test("Approve on the phone lets exactly that call run; the terminal says the push answered; a second press is refused", { timeout: 90_000 }, async (t) => {
  const { ntfy, server, pi, term, build, run, push, code, sessionId } = await setup(t);
  assert.equal(existsSync(build), true, "nothing ran before the press");
  const pressed = await ntfy.press(push.actions![0]!);
  assert.deepEqual(pressed, { status: 200, body: { code, decision: "approved", state: "decided" } });
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false],
  );
  await term.dialogs[0]!.dismissed;
  assert.ok(
    pi.notices().some((n) => n.includes(`审批请求正在推送到手机（ntfy），审批码 ${code}`)),
    `the terminal says the request is on its way to the phone, not "not sent": ${JSON.stringify(pi.notices())}`,
  );
  assert.ok(
    pi.notices().some((n) => /rm -rf」已在手机推送上批准/.test(n)),
    `the terminal is told the push answered: ${JSON.stringify(pi.notices())}`,
  );
  const approvals = await waitUntil(async () => {
    const { body } = await call(server, "GET", `/operator/approvals?state=all&session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
    return body.approvals[0]?.state === "approved" && body.approvals;
  }, "the agent resolved the approval");
  assert.deepEqual([approvals[0].via, approvals[0].decided_by], ["ntfy", "ntfy"]);
  assert.equal((await ntfy.press(push.actions![0]!)).status, 404, "the same button again");
  const other = await ntfy.press(push.actions![1]!);
  assert.deepEqual([other.status, (other.body as { state: string }).state], [409, "approved"], "the other button: answered already, and how it ended");
});

test("Deny on the phone refuses the call: nothing runs and the model reads that the push denied it", { timeout: 90_000 }, async (t) => {
  const { ntfy, pi, build, run, push } = await setup(t);
  assert.equal((await ntfy.press(push.actions![1]!)).status, 200);
  await run;
  assert.equal(existsSync(build), true, "denied: nothing ran");
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.match(result!.text, /在手机推送上拒绝了「rm -rf」/);
});

test("another extension's dialog reaches the phone at high priority as 'needs you'; a failed run arrives at default priority", {
  timeout: 90_000,
}, async (t) => {
  const ntfy = await startFakeNtfy();
  t.after(() => ntfy.stop());
  const server = await startServer({ config: { ntfyUrl: ntfy.url, ntfyTopic: ntfy.topic, ntfyToken: ntfy.token } });
  const term = answerableTerminal();
  const deployer = confirmingDeployer("部署到生产？\n[点这里](https://evil.example)");
  const pi = await piOnServer(t, server, { ui: term.ui, extensions: [deployer], userConfig: { language: "zh-CN" } });
  await pi.prompt("/anon-notify");
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("deploy", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "401 invalid api key" }),
  ]);
  const run = pi.prompt("部署");
  const needsYou = await waitUntil(() => ntfy.published.find((p) => p.priority === 4), "the needs-you push", 30_000);
  assert.deepEqual(needsYou.tags, ["warning"]);
  assert.match(
    needsYou.message!,
    /^摘要：项目 work：需要你：.*「部署到生产？ \[点这里\]\(https:\/\/evil\.example\)」/m,
    "plain text: ntfy is never told it is markdown",
  );
  assert.equal(needsYou.message!.split("\n").length, 4, "the dialog's line break never starts a line of its own");
  assert.deepEqual(needsYou.extra, {}, "no click URL, whatever the dialog says");
  (await waitUntil(() => term.dialogs[0], "the deploy dialog")).answer(true);
  await run;
  const failed = await waitUntil(() => ntfy.published.find((p) => p.priority === 3), "the failed run's push", 30_000);
  assert.deepEqual(failed.tags, ["x"]);
  assert.match(failed.message!, /401 invalid api key/);
});
