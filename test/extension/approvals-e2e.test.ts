/**
 * Approvals end to end: the extension as Pi loads it, in a REAL Pi session (SDK + faux model
 * calling `bash` with `rm -rf build`), talking to the REAL notify-webhook plugin (loopback, SQLite)
 * with a mock bot whose sends to the owner are recorded, as a platform would answer them.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { ASK_TOOL_NAME } from "../../extension/approvals/gate.ts";
import { AuditPage } from "../../protocol/audit.ts";
import { ai, answerableTerminal, toolResults } from "../../harness/pi.ts";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { waitUntil } from "../../harness/wait.ts";
import { confirmingDeployer } from "../helpers/dialog-tool.ts";
import { RECIPIENT } from "../../harness/extension-env.ts";
import { approvals, ask, auditActions, operatorDecisionRefused, ownerSays, pendingApproval, rmBuild, setup } from "./approvals-stage.ts";

test("answered in the terminal first: the command runs, the owner was asked with a code and then told it is closed", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId, owner, build } = await setup(t, { pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("删好了")]);
  const run = pi.prompt("清理构建目录");
  const dialog = await waitUntil(() => term.dialogs[0], "the terminal dialog opened");
  assert.equal(dialog.title, "需要批准：rm -rf");
  assert.equal(
    dialog.message,
    [
      "──── 将要运行（原文；控制字符与换行已显示为 ⏎ \\t 等可见符号）────",
      "rm -rf build",
      "──── 命令结束 ────",
      "理由：规则 rm-rf ← rm -rf build、strict.unlisted ← rm -rf build（严格模式：只有安全清单上的命令和 approval.allow 允许的命令无需批准）",
      "10 分钟内无人回答则拒绝。也可以在聊天中回答，先到的答案为准。",
    ].join("\n"),
  );
  const request = await waitUntil(() => owner[0], "the owner got the request");
  const code = /审批 ([A-Z]{5})/.exec(request)?.[1];
  assert.ok(code, request);
  assert.match(request, /rm -rf build/);
  assert.ok(request.split("\n").includes("规则：rm-rf（第 1 行）; strict.unlisted（第 1 行）"), `every rule with where it matched: ${request}`);
  assert.match(request, new RegExp(`anon\\.approve ${code}`));
  assert.equal(existsSync(build), true, "nothing ran while waiting");

  dialog.answer(true);
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false],
  );

  const closing = await waitUntil(() => owner[1], "the owner was told the request is closed");
  assert.match(closing, new RegExp(`${code} 已结束.*在终端批准`));
  const [approval] = await approvals(koishi, sessionId);
  assert.equal(approval.state, "approved");
  assert.equal(approval.via, "terminal");
  // A chat answer after the terminal's is answered, not dropped.
  assert.deepEqual(await ownerSays(koishi, `anon.deny ${code}`), [`审批 ${code} 已经有了结果：已在终端批准。这次的回答没有生效。`]);
  const actions = await waitUntil(async () => {
    const all = await auditActions(koishi, sessionId);
    return all.includes("approval.closing_sent") && all.includes("approval.refused") ? all : undefined;
  }, "the trail has the whole story");
  for (const action of ["approval.requested", "approval.request_sent", "approval.resolved", "approval.closing_sent", "approval.refused"])
    assert.ok(actions.includes(action), action);
  assert.equal(owner.filter((m) => m.includes(code)).length, 2, "one request, one closing message");
});

test("denied in the terminal: blocked, and the model reads why", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { pi, build } = await setup(t, { pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("好的，不删")]);
  const run = pi.prompt("清理构建目录");
  (await waitUntil(() => term.dialogs[0], "the dialog opened")).answer(false);
  await run;
  assert.equal(existsSync(build), true);
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.match(result!.text, /在终端.*拒绝了「rm -rf」.*不要重试/);
});

test("nobody answers: rejected at the timeout, the dialog is closed and the owner told", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId, owner, build } = await setup(t, { approval: { timeoutMs: 1000 }, pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("超时了")]);
  await pi.prompt("清理构建目录");
  assert.equal(existsSync(build), true);
  assert.match(toolResults(pi, "bash")[0]!.text, /等待批准超时/);
  await term.dialogs[0]!.dismissed;
  assert.ok(
    pi.notices().some((n) => /rm -rf」已超时拒绝/.test(n)),
    "the terminal is told the dialog closed",
  );
  await waitUntil(() => owner.some((m) => /超时无人回答/.test(m)), "the owner was told it timed out");
  assert.equal((await approvals(koishi, sessionId))[0].state, "timeout");
});

test("the run is aborted while waiting: rejected, not held hostage", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId, owner, build } = await setup(t, { pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("x")]);
  const run = pi.prompt("清理构建目录");
  await waitUntil(() => term.dialogs[0], "the dialog opened");
  await pi.session.abort();
  await run;
  assert.equal(existsSync(build), true);
  // Pi words an aborted call's result itself; the record says why it was rejected.
  assert.equal(toolResults(pi, "bash")[0]?.isError, true);
  const approval = await waitUntil(async () => (await approvals(koishi, sessionId)).find((a) => a.state !== "pending"), "the approval resolved");
  assert.deepEqual([approval.state, approval.via], ["rejected", "aborted"]);
  await waitUntil(() => owner.some((m) => /运行被中断，审批已取消/.test(m)), "the owner was told");
});

test("print mode and subagents never wait: the policy rejects at once and nothing is asked", { timeout: 90_000 }, async (t) => {
  for (const mode of ["print", "json"] as const) {
    await t.test(mode, async (t) => {
      const { koishi, pi, sessionId, owner, build } = await setup(t, { pi: { mode, persist: mode !== "json" } });
      pi.script([rmBuild(), ai.fauxAssistantMessage("被拦截")]);
      await pi.prompt("清理构建目录");
      assert.equal(existsSync(build), true);
      assert.match(
        toolResults(pi, "bash")[0]!.text,
        /^已拦截「rm -rf」（规则 rm-rf、strict\.unlisted（严格模式：[^）]*））：.*interactive, switched-on session/,
      );
      assert.deepEqual(await approvals(koishi, sessionId), []);
      assert.deepEqual(owner, []);
    });
  }
});

test("calls the policy does not cover run without asking; approvals off (the default) asks nothing", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { pi } = await setup(t, { approval: { enabled: false }, pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "echo hi" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("ok")]);
  await pi.prompt("做事");
  assert.equal(term.dialogs.length, 0);
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false, false],
  );
  assert.equal(pi.session.getActiveToolNames().includes(ASK_TOOL_NAME), false, "ask_approval is not offered while approvals are off");
});

test("ask_approval returns approved, rejected and timeout, each with words the model can act on", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { pi } = await setup(t, { approval: { timeoutMs: 1000 }, pi: { ui: term.ui } });
  assert.equal(pi.session.getActiveToolNames().includes(ASK_TOOL_NAME), true, "offered in a switched-on main session");
  const args = { action: "发布 v2.0", reason: "用户要求今天发布", payload: "npm publish" };
  pi.script([ask(args), ask(args), ask(args), ai.fauxAssistantMessage("完成")]);
  const run = pi.prompt("发布");
  (await waitUntil(() => term.dialogs[0], "first dialog")).answer(true);
  (await waitUntil(() => term.dialogs[1], "second dialog")).answer(false);
  await run;
  const texts = toolResults(pi, ASK_TOOL_NAME).map((r) => r.text);
  assert.equal(texts.length, 3);
  assert.match(texts[0]!, /^approved/);
  assert.match(texts[1]!, /^rejected/);
  assert.match(texts[2]!, /^timeout/);
});

test("ask_approval is never offered in a subagent", { timeout: 90_000 }, async (t) => {
  const { pi } = await setup(t, { pi: { mode: "json", persist: false } });
  assert.equal(pi.session.getActiveToolNames().includes(ASK_TOOL_NAME), false);
});

test("another extension's dialog sends one urgent 'needs you' notice; this extension's own dialogs send none", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const deployer = confirmingDeployer("部署到生产？");
  const { koishi, pi, sessionId } = await setup(t, { pi: { ui: term.ui, extensions: [deployer] } });
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("deploy", {})], { stopReason: "toolUse" }), rmBuild(), ai.fauxAssistantMessage("完成")]);
  const run = pi.prompt("部署然后清理");
  (await waitUntil(() => term.dialogs[0], "the deploy dialog")).answer(true);
  (await waitUntil(() => term.dialogs[1], "the approval dialog")).answer(true);
  await run;
  // The run's completion notice leaves the same queue after any notice of the dialogs before it.
  const accepted = await waitUntil(async () => {
    const answer = await call(koishi, "GET", `/operator/audit?session_id=${sessionId}&limit=200`, undefined, OPERATOR_TOKEN);
    const events = AuditPage.parse(answer.body)
      .entries.filter((e) => e.action === "event.accepted")
      .map((e) => e.data.event as { status: string; details?: { needs_you?: boolean } });
    return events.some((e) => e.status === "completed") ? events : undefined;
  }, "the run's completion notice reached the server");
  const notices = accepted.filter((e) => e.details?.needs_you);
  assert.equal(notices.length, 1, "one notice, for the other extension's dialog only");
  const event = notices[0] as unknown as { status: string; summary: string; details: { prompt: { title: string } } };
  assert.equal(event.status, "warning");
  assert.equal(event.details.prompt.title, "部署到生产？");
  assert.match(event.summary, /需要你.*部署到生产？/);
});

test("approved by the owner in the chat, never by the operator token this Pi's user can read: the command runs, the terminal dialog closes and says so", {
  timeout: 90_000,
}, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId, owner, build } = await setup(t, { pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("删好了")]);
  const run = pi.prompt("清理构建目录");
  const approval = await pendingApproval(koishi, sessionId);
  const [row] = await koishi.app.database.get("anon_notify_approval", { approval_id: approval.approval_id });
  assert.equal(row!.agent_uid, process.getuid?.() ?? null, "the request says which OS user Pi runs as");
  await operatorDecisionRefused(koishi, approval.code);
  assert.equal(existsSync(build), true, "the refused decision released nothing");
  assert.deepEqual(await ownerSays(koishi, `anon.approve ${approval.code}`), [`已批准 ${approval.code}（rm -rf），决定已发给 Pi。`]);
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  await term.dialogs[0]!.dismissed;
  assert.ok(
    pi.notices().some((n) => /rm -rf」已在聊天中批准/.test(n)),
    `the terminal is told who answered: ${JSON.stringify(pi.notices())}`,
  );
  const final = await waitUntil(async () => (await approvals(koishi, sessionId)).find((a) => a.state === "approved"), "resolved on the server");
  assert.deepEqual([final.via, final.decided_by], ["chat", `chat:mock:${RECIPIENT.qq}`]);
  await waitUntil(() => owner.find((m) => m.includes(`${approval.code} 已结束`)), "one closing message");
  // The control command was ACKed as applied.
  const control = await waitUntil(async () => {
    const commands = await call(koishi, "GET", `/operator/commands?session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
    const found = commands.body.commands.filter((c: { kind: string }) => c.kind === "approval_decision");
    return found.every((c: { state: string }) => c.state === "accepted") ? found : undefined;
  }, "the decision's control command was ACKed");
  assert.deepEqual(
    control.map((c: { state: string; outcome: string }) => [c.state, c.outcome]),
    [["accepted", "applied"]],
  );
});

test("denied by the owner: blocked with the owner's reason in the tool result; a duplicate decision is answered", { timeout: 90_000 }, async (t) => {
  const { koishi, pi, sessionId, build } = await setup(t, { pi: { ui: answerableTerminal().ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("不删了")]);
  const run = pi.prompt("清理构建目录");
  const approval = await pendingApproval(koishi, sessionId);
  assert.deepEqual(await ownerSays(koishi, `anon.deny ${approval.code} build 里有我要的产物`), [
    `已拒绝 ${approval.code}（rm -rf），理由：build 里有我要的产物，决定已发给 Pi。`,
  ]);
  const [duplicate] = await ownerSays(koishi, `anon.approve ${approval.code}`);
  assert.match(duplicate!, new RegExp(`审批 ${approval.code} 已经有了结果.*这次的回答没有生效`));
  await run;
  assert.equal(existsSync(build), true);
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.match(result!.text, /在聊天中拒绝了「rm -rf」，理由：build 里有我要的产物/);
});

// A binding that differs is refused before anything (test/server/approvals.test.ts); here no operator-API
// decision gets that far, whatever the binding, since this Pi runs as the server's own user.
test("operator-API decisions for this Pi, with a wrong binding or the right one, are refused and the call keeps waiting for the owner", {
  timeout: 90_000,
}, async (t) => {
  const { koishi, pi, sessionId, build } = await setup(t, { pi: { ui: answerableTerminal().ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("好")]);
  const run = pi.prompt("清理构建目录");
  const approval = await pendingApproval(koishi, sessionId);
  const [row] = await koishi.app.database.get("anon_notify_approval", { approval_id: approval.approval_id });
  const binding = { tool_call_id: row!.tool_call_id, args_digest: row!.args_digest, cwd: row!.cwd };
  await operatorDecisionRefused(koishi, approval.approval_id, { decision: "approved", binding: { ...binding, args_digest: "0".repeat(64) } });
  await operatorDecisionRefused(koishi, approval.approval_id, { decision: "approved", binding });
  assert.equal(existsSync(build), true, "still waiting");
  assert.equal((await approvals(koishi, sessionId))[0].state, "pending");
  assert.deepEqual(await ownerSays(koishi, `anon.approve ${approval.code}`), [`已批准 ${approval.code}（rm -rf），决定已发给 Pi。`]);
  await run;
  assert.equal(existsSync(build), false);
});

test("an English session gets the dialog, the terminal notes and the model's refusal in English", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId, build } = await setup(t, { language: "en-US", pi: { ui: term.ui } });
  pi.script([rmBuild(), ai.fauxAssistantMessage("ok")]);
  const run = pi.prompt("clean the build folder");
  const dialog = await waitUntil(() => term.dialogs[0], "the terminal dialog opened");
  assert.equal(dialog.title, "Approval needed: rm -rf");
  assert.equal(
    dialog.message,
    [
      "──── Will run (verbatim; control characters and line breaks shown as ⏎ \\t …) ────",
      "rm -rf build",
      "──── end of command ────",
      "Reason: rule rm-rf ← rm -rf build, strict.unlisted ← rm -rf build (strict mode: only safe-listed commands and those approval.allow names run unasked)",
      "Rejected if nobody answers within 10 min. You can also answer in the chat; the first answer counts.",
    ].join("\n"),
  );
  const approval = await pendingApproval(koishi, sessionId);
  await waitUntil(
    () => pi.notices().includes(`The approval request went to the chat with code ${approval.code}; answer here or there.`),
    "the terminal was told the code",
  );
  assert.deepEqual(await ownerSays(koishi, `anon.deny ${approval.code} keep it`), [`已拒绝 ${approval.code}（rm -rf），理由：keep it，决定已发给 Pi。`]);
  await run;
  assert.equal(existsSync(build), true);
  await dialog.dismissed;
  assert.ok(pi.notices().includes(`"rm -rf" was rejected in the chat; the terminal dialog is closed.`), JSON.stringify(pi.notices()));
  assert.equal(
    toolResults(pi, "bash")[0]!.text,
    `The user rejected "rm -rf" in the chat, reason: keep it. Do not retry the same operation; wait for the user's further instructions. (rejected by the user)`,
  );
  const chinese = pi.notices().filter((n) => /\p{Script=Han}/u.test(n));
  assert.deepEqual(chinese, [], "every note the English session showed is in English");
});
