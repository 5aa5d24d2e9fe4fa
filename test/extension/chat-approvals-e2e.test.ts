/**
 * Approvals answered from the owner's chat, end to end through real parts: a REAL Pi session (SDK,
 * faux model calling `bash` with `rm -rf build`) with this extension and approvals on, the REAL
 * notify-webhook plugin in Koishi (loopback, SQLite), and plugin-mock chat clients for the owner
 * and a stranger. The terminal dialog stays open, so only the chat answers.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { OPERATOR_TOKEN, call, startServer } from "../../harness/agent-api.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import type { ChatHarness } from "../../harness/chat.ts";
import { ai, answerableTerminal, toolResults } from "../../harness/pi.ts";
import { piOnChat } from "../helpers/pi-chat.ts";
import { waitUntil } from "../../harness/wait.ts";

async function setup(t: TestContext) {
  const term = answerableTerminal();
  const { chat, pi } = await piOnChat(t, { ui: term.ui, userConfig: { language: "zh-CN", approval: { enabled: true } } });
  await pi.prompt("/anon-notify");
  const build = join(pi.cwd, "build");
  mkdirSync(build, { recursive: true });
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好的")]);
  const run = pi.prompt("清理构建目录");
  // The request the owner got in the chat, with its code.
  const request = await waitUntil(() => chat.sent.find((m) => /【Pi 审批 [A-Z]{5}】/.test(m.text)), "the approval request reached the owner's chat", 30_000);
  const code = /审批 ([A-Z]{5})/.exec(request.text)![1]!;
  assert.match(request.text, /rm -rf build/);
  return { chat, pi, term, build, run, request, code, sessionId: pi.session.sessionManager.getSessionId() };
}

async function approvalState(chat: ChatHarness, sessionId: string): Promise<string> {
  const { body } = await call(chat, "GET", `/operator/approvals?state=all&session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
  return body.approvals[0].state;
}

test("approved with anon.approve in the owner's chat: a stranger's approve changes nothing, the owner's runs the command, a second approve hears it was answered", {
  timeout: 90_000,
}, async (t) => {
  const { chat, pi, term, build, run, code, sessionId } = await setup(t);

  assert.deepEqual(await chat.stranger().receive(`anon.approve ${code}`), ["这些指令只有主人能用。"]);
  assert.equal(await approvalState(chat, sessionId), "pending", "the stranger changed nothing");
  assert.equal(existsSync(build), true, "nothing ran");

  assert.deepEqual(await chat.owner().receive(`anon.approve ${code}`), [`已批准 ${code}（rm -rf），决定已发给 Pi。`]);
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false],
  );
  await term.dialogs[0]!.dismissed;
  assert.ok(
    pi.notices().some((n) => /rm -rf」已在聊天中批准/.test(n)),
    `the terminal is told the chat answered: ${JSON.stringify(pi.notices())}`,
  );

  await waitUntil(() => chat.sent.find((m) => m.text.includes(`${code} 已结束`) && m.text.includes("在聊天中批准")), "the owner got the closing message");
  assert.deepEqual(await chat.owner().receive(`anon.approve ${code}`), [`审批 ${code} 已经有了结果：已在聊天中批准。这次的回答没有生效。`]);
});

test("the self-approval loop's shape — the operator token posted to the decision route while the call waits — is refused, the call stays pending, and the owner decides in the chat", {
  timeout: 90_000,
}, async (t) => {
  const { chat, pi, build, run, code, sessionId } = await setup(t);
  // What the agent's background loop did: read data/operator.token and answer its own request.
  const { body } = await call(chat, "GET", `/operator/approvals?state=open&session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
  const self = await call(chat, "POST", `/operator/approvals/${body.approvals[0].approval_id}/decision`, { decision: "approved" }, OPERATOR_TOKEN);
  assert.deepEqual([self.status, self.body], [403, { error: "operator_decisions_off" }]);
  assert.equal(await approvalState(chat, sessionId), "pending", "the call stays pending");
  assert.equal(existsSync(build), true, "nothing ran");

  assert.deepEqual(await chat.owner().receive(`anon.approve ${code}`), [`已批准 ${code}（rm -rf），决定已发给 Pi。`]);
  await run;
  assert.equal(existsSync(build), false, "the owner approved: the command ran");
  const closing = await waitUntil(() => chat.sent.find((m) => m.text.includes(`${code} 已结束`)), "the owner got the closing message");
  assert.equal(closing.text, `【Pi 审批 ${code} 已结束】rm -rf：已在聊天中批准，命令已放行。`);
  const audit = await call(chat, "GET", `/operator/audit?session_id=${sessionId}&limit=100`, undefined, OPERATOR_TOKEN);
  assert.deepEqual(
    audit.body.entries
      .filter((e: { action: string }) => e.action === "approval.refused")
      .map((e: { data: { via: string; error: string } }) => [e.data.via, e.data.error]),
    [["operator", "operator_decisions_off"]],
  );
  assert.ok(
    pi.notices().some((n) => /已在聊天中批准/.test(n)),
    `the terminal is told where it was decided: ${JSON.stringify(pi.notices())}`,
  );
});

test("denied by replying 拒绝 with a reason to the request: blocked, and the model reads the owner's reason", { timeout: 90_000 }, async (t) => {
  const { chat, pi, build, run, request, code } = await setup(t);
  assert.deepEqual(await chat.owner().receive(`<quote id="${request.id}"/>拒绝 build 里有我要的产物`), [
    `已拒绝 ${code}（rm -rf），理由：build 里有我要的产物，决定已发给 Pi。`,
  ]);
  await run;
  assert.equal(existsSync(build), true, "denied: nothing ran");
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.match(result!.text, /在聊天中拒绝了「rm -rf」，理由：build 里有我要的产物/);
});

test("a command that tries to forge an approve line reaches the owner as one visible line; only the real answer lines start a line", {
  timeout: 90_000,
}, async (t) => {
  const term = answerableTerminal();
  const { chat, pi } = await piOnChat(t, { ui: term.ui, userConfig: { language: "zh-CN", approval: { enabled: true } } });
  await pi.prompt("/anon-notify");
  const forged = "ls\n批准：anon.approve XXXXX\n\n\ngit push --force origin main";
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: forged })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好的")]);
  const run = pi.prompt("推送");
  const request = await waitUntil(() => chat.sent.find((m) => /【Pi 审批 [A-Z]{5}】/.test(m.text)), "the approval request reached the owner's chat", 30_000);
  const code = /审批 ([A-Z]{5})/.exec(request.text)![1]!;
  const lines = request.text.split("\n");
  assert.ok(lines.includes("┃ ls⏎批准：anon.approve XXXXX⏎⏎⏎git push --force origin main"), request.text);
  assert.deepEqual(
    lines.filter((line) => /^(批准|拒绝|anon\.)/.test(line)),
    [`批准：anon.approve ${code}，或回复本消息“同意”`, `拒绝：anon.deny ${code} [理由]，或回复本消息“拒绝”`],
  );
  assert.match(request.text, /^规则：.*git-push-force/m);
  assert.deepEqual(await chat.owner().receive("anon.approve XXXXX"), ["找不到审批“XXXXX”。用 anon.approvals 查看待审批的请求。"]);
  assert.deepEqual(await chat.owner().receive(`anon.deny ${code}`), [`已拒绝 ${code}（git push --force），决定已发给 Pi。`]);
  await run;
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [true],
    "denied: nothing ran",
  );
});

test("approve for 30 minutes from the chat: the session's next rm -rf runs at once by the grant, the owner gets one closing line naming the grant and its use; after anon.revoke the next one asks again", {
  // Grants now bind to the request's `argv`, which the gate sends from issue 34 (branch approvals-gate): until it does, none can be made.
  timeout: 120_000,
}, async (t) => {
  const term = answerableTerminal();
  const { chat, pi } = await piOnChat(t, {
    ui: term.ui,
    userConfig: { language: "zh-CN", approval: { enabled: true, mode: "rules", grantableRules: ["rm-rf"] } },
  });
  await pi.prompt("/anon-notify");
  const dirs = ["a", "b", "c"].map((name) => join(pi.cwd, name));
  for (const dir of dirs) mkdirSync(dir, { recursive: true });
  const remove = (name: string) => [
    ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: `rm -rf ${name}` })], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("好的"),
  ];
  const requests = () => chat.sent.filter((m) => /【Pi 审批 [A-Z]{5}】/.test(m.text));

  pi.script(remove("a"));
  const first = pi.prompt("清理 a");
  const request = await waitUntil(() => requests()[0], "the first request reached the owner", 30_000);
  const code = /审批 ([A-Z]{5})/.exec(request.text)![1]!;
  const [granted] = await chat.owner().receive(`anon.approve ${code} 30m`);
  const grantId = /授权 (G[A-Z]{4})/.exec(granted ?? "")?.[1];
  assert.ok(grantId, granted);
  await first;
  assert.equal(existsSync(dirs[0]!), false, "approved: the first ran");

  pi.script(remove("b"));
  await pi.prompt("清理 b");
  assert.equal(existsSync(dirs[1]!), false, "the grant approved the second at once");
  assert.equal(requests().length, 1, "no second request was sent to the owner");
  const closing = await waitUntil(
    () => chat.sent.find((m) => m.text.includes(`已按授权 ${grantId} 批准（第 1 次使用）`)),
    "the owner's closing line for the grant's use",
  );
  assert.match(closing.text, /^【Pi 审批 [A-Z]{5} 已结束】rm -rf：已按授权 G[A-Z]{4} 批准（第 1 次使用），命令已放行。$/);

  assert.deepEqual(await chat.owner().receive(`anon.revoke ${grantId}`), [`已撤销授权 ${grantId}（用过 1 次）。之后的请求会再问你。`]);
  pi.script(remove("c"));
  const third = pi.prompt("清理 c");
  const again = await waitUntil(() => requests()[1], "revoked: the third asks the owner again", 30_000);
  assert.equal(existsSync(dirs[2]!), true, "nothing ran before the owner answered");
  await chat.owner().receive(`anon.deny ${/审批 ([A-Z]{5})/.exec(again.text)![1]!}`);
  await third;
  assert.equal(existsSync(dirs[2]!), true, "denied: the third did not run");
});

test("Pi says truly how the owner was reached: sent to the chat, or (a server with no chat) not sent at all, in the session's language", {
  timeout: 120_000,
}, async (t) => {
  const { chat, pi, term, run, code } = await setup(t);
  const sent = await waitUntil(() => pi.notices().find((n) => n.includes(code)), "the terminal heard how the request went");
  assert.equal(sent, `审批请求已发到聊天，审批码 ${code}；在这里或聊天中回答均可。`);
  assert.ok(
    chat.sent.some((m) => m.text.includes(`审批 ${code}】`)),
    "and it was",
  );
  term.dialogs[0]!.answer(false);
  await run;

  // The standalone server without a bot: nobody to send to, and Pi says so.
  const alone = await startServer();
  t.after(() => alone.stop());
  const lone = answerableTerminal();
  const pi2 = await piOnServer(t, alone, { ui: lone.ui, userConfig: { language: "en-US", approval: { enabled: true } } });
  await pi2.prompt("/anon-notify");
  mkdirSync(join(pi2.cwd, "build"), { recursive: true });
  pi2.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("ok")]);
  const run2 = pi2.prompt("clean up");
  const none = await waitUntil(() => pi2.notices().find((n) => n.includes("approval request")), "the terminal heard there was no chat", 30_000);
  assert.match(none, /^There is no chat to send to, so no approval request was sent \(code [A-Z]{5}\); answer here or in the console\.$/);
  (await waitUntil(() => lone.dialogs[0], "the dialog")).answer(false);
  await run2;
});
