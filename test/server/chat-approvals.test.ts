/**
 * The owner answers approvals in the chat, through a real Koishi app with plugin-mock clients: the
 * commands, replies quoting the request, and everyone else refused. The reply words are a pure
 * table first.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import type { Context } from "koishi";
import type { ApprovalRequest } from "../../protocol/approvals.ts";
import { replyDecision } from "../../server/chat/approvals.ts";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call, operatorApi } from "../../harness/agent-api.ts";
import { STRANGER, startChat, type ChatHarness } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";

test("reply words: a clear yes approves, a clear no denies with what follows as the reason, anything else decides nothing", () => {
  const table: [string, ReturnType<typeof replyDecision>][] = [
    ["同意", { decision: "approved", reason: null }],
    [" 同意。", { decision: "approved", reason: null }],
    ["批准！", { decision: "approved", reason: null }],
    ["yes", { decision: "approved", reason: null }],
    ["YES", { decision: "approved", reason: null }],
    ["Ｙ", { decision: "approved", reason: null }],
    ["y", { decision: "approved", reason: null }],
    ["approve", { decision: "approved", reason: null }],
    ["拒绝", { decision: "rejected", reason: null }],
    ["拒绝 build 里有我要的产物", { decision: "rejected", reason: "build 里有我要的产物" }],
    ["拒绝，先备份", { decision: "rejected", reason: "先备份" }],
    ["拒绝：先备份。", { decision: "rejected", reason: "先备份" }],
    ["不同意 太危险", { decision: "rejected", reason: "太危险" }],
    ["no", { decision: "rejected", reason: null }],
    ["No: too risky", { decision: "rejected", reason: "too risky" }],
    ["n", { decision: "rejected", reason: null }],
    ["deny not now", { decision: "rejected", reason: "not now" }],
    // Not a clear answer: never a decision, least of all an approval.
    ["同意吗", null],
    ["同意，但是先备份", null],
    ["yes but back up first", null],
    ["yesterday", null],
    ["nope", null],
    ["never", null],
    ["denying", null],
    ["好", null],
    ["", null],
    ["看看再说", null],
  ];
  for (const [text, expected] of table) assert.deepEqual(replyDecision(text), expected, JSON.stringify(text));
  assert.equal(replyDecision(`拒绝 ${"长".repeat(300)}`)?.reason?.length, 200, "a reason is cut to what the protocol takes");
});

/** A fresh tool call each time, so requests in one test never share a binding. */
const approvalRequest = (overrides: Partial<ApprovalRequest> = {}) =>
  approvalRequestOf({ tool_call_id: `call-${randomUUID()}`, cwd: "/home/u/shop", ...overrides });

async function setup(t: TestContext) {
  const harness = await startChat({
    plugins: (use) =>
      // Another plugin (the persona, say) running an owner command on the owner's behalf.
      void use((ctx: Context) =>
        ctx.middleware((session, next) => (session.content?.startsWith("请人格代答 ") ? session.execute(session.content.slice(6)) : next())),
      ),
  });
  t.after(() => harness.stop());
  await agentApi(harness).heartbeat({ project: "shop" });
  return harness;
}

/** Posts a request as the extension would and waits until the owner got it; answers its code and message. */
async function requested(harness: ChatHarness, overrides: Partial<ApprovalRequest> = {}) {
  const created = await call(harness, "POST", "/approvals", approvalRequest(overrides));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const code: string = created.body.approval.code;
  const message = await waitUntil(() => harness.sent.find((m) => m.text.includes(`审批 ${code}】`)), `the request ${code} reached the owner`);
  return { id: created.body.approval.approval_id as string, code, message };
}

async function approvalOf(harness: ChatHarness, id: string) {
  const list = await call(harness, "GET", "/operator/approvals?state=all", undefined, OPERATOR_TOKEN);
  return (list.body.approvals as { approval_id: string; state: string; decision: string | null; decided_by: string | null; via: string | null }[]).find(
    (a) => a.approval_id === id,
  )!;
}

/** The control commands queued for session s-1, as the extension would claim them. */
async function decisionsQueued(harness: ChatHarness) {
  const { body } = await operatorApi(harness).list("s-1");
  return (body.commands as { kind: string }[]).filter((c) => c.kind === "approval_decision").length;
}

test("anon.approve and anon.deny: the owner decides by code; a second answer hears what it became; unknown and ended codes are said plainly", async (t) => {
  const harness = await setup(t);
  const owner = harness.owner();
  const first = await requested(harness);

  const [listing] = await owner.receive("anon.approvals");
  assert.match(listing ?? "", /待审批的请求（1 个）/);
  assert.match(listing ?? "", new RegExp(`${first.code} · #1 shop · bash · rm -rf build · 还剩 `));

  assert.deepEqual(await owner.receive(`anon.approve ${first.code.toLowerCase()}`), [`已批准 ${first.code}（rm -rf），决定已发给 Pi。`]);
  assert.deepEqual(await owner.receive("anon.approvals"), ["现在没有待审批的请求。"], "a decided approval waits for nobody");
  const approved = await approvalOf(harness, first.id);
  assert.deepEqual([approved.state, approved.decision, approved.via, approved.decided_by], ["decided", "approved", "chat", "chat:mock:10001"]);
  assert.equal(await decisionsQueued(harness), 1, "the decision went on as a control command");
  assert.deepEqual(await owner.receive(`anon.deny ${first.code}`), [`审批 ${first.code} 已经有了结果：已在聊天中批准，正在送达 Pi。这次的回答没有生效。`]);

  // The extension's word closes it; a late answer then hears the final result.
  await call(harness, "POST", `/approvals/${first.id}/resolution`, { session_id: "s-1", runtime_id: "r-1", outcome: "approved", via: "chat", reason: null });
  assert.deepEqual(await owner.receive(`anon.approve ${first.code}`), [`审批 ${first.code} 已经有了结果：已在聊天中批准。这次的回答没有生效。`]);

  const second = await requested(harness);
  assert.deepEqual(await owner.receive(`anon.deny ${second.code} build 里有 我要的产物`), [
    `已拒绝 ${second.code}（rm -rf），理由：build 里有 我要的产物，决定已发给 Pi。`,
  ]);
  const denied = await approvalOf(harness, second.id);
  assert.deepEqual([denied.state, denied.decision], ["decided", "rejected"]);

  const late = await requested(harness, { expires_at: new Date(Date.now() - 1000).toISOString() });
  assert.deepEqual(await owner.receive(`anon.approve ${late.code}`), [`审批 ${late.code} 已经结束：已过了回答期限，按拒绝处理。这次的回答没有生效。`]);
  assert.deepEqual(await owner.receive("anon.approve ZZZZZ"), ["找不到审批“ZZZZZ”。用 anon.approvals 查看待审批的请求。"]);
  assert.match((await owner.receive("anon.approve"))[0] ?? "", /用法：anon\.approve/);
  assert.equal(await decisionsQueued(harness), 2, "only the two first answers went on");

  const { body } = await operatorApi(harness).audit({ limit: "200" });
  const actions = (body.entries as { action: string; data: { by?: string; via?: string; error?: string } }[]).reverse();
  assert.deepEqual(
    actions.filter((e) => e.action === "approval.decided").map((e) => [e.data.by, e.data.via]),
    [
      ["chat:mock:10001", "chat"],
      ["chat:mock:10001", "chat"],
    ],
  );
  assert.deepEqual(
    actions.filter((e) => e.action === "approval.refused").map((e) => e.data.error),
    ["already_decided", "already_decided", "approval_expired", "not_found"],
  );
});

test("the request shows the command verbatim on one delimited line, no forged answer line; a long one is cut with the count and anon.approval sends all of it", async (t) => {
  const harness = await setup(t);
  const owner = harness.owner();
  const forged = "ls\n批准：anon.approve XXXXX\n\n\ngit push --force origin main";
  const { code, message } = await requested(harness, { command: forged, rules: ["git-push-force"] });
  const lines = message.text.split("\n");
  assert.ok(lines.includes("┃ ls⏎批准：anon.approve XXXXX⏎⏎⏎git push --force origin main"), message.text);
  assert.deepEqual(
    lines.filter((line) => /^(批准|拒绝|anon\.)/.test(line)),
    [`批准：anon.approve ${code}，或回复本消息“同意”`, `拒绝：anon.deny ${code} [理由]，或回复本消息“拒绝”`],
  );
  assert.ok(lines.includes("规则：git-push-force"));
  assert.match(message.text, /请在 \d+分钟内回答，否则按拒绝处理。/);

  const long = `echo ${"a".repeat(3000)}\nrm -rf ~ <at id="10001"/> &amp;`;
  const cut = await requested(harness, { command: long, rules: ["rm-rf"], matched: [{ rule: "rm-rf", at: "rm -rf ~" }] });
  assert.ok(cut.message.text.split("\n").includes("规则：rm-rf（第 2 行）"), `where the rule matched: ${cut.message.text}`);
  assert.match(cut.message.text, /┃ echo a+ ⟦…\d+…⟧ a+⏎rm -rf ~ <at id="10001"\/> &amp;$/m, "head and tail; the tail's markup is text");
  assert.match(cut.message.text, new RegExp(`中间有 \\d+ 个字符没有显示，其中可能还有别的命令。回答前先看完整内容：anon\\.approval ${cut.code}`));
  const parts = await owner.receive(`anon.approval ${cut.code.toLowerCase()}`);
  assert.equal(parts.length, 3, parts.join("\n---\n"));
  assert.match(parts[0]!, new RegExp(`^【Pi 审批 ${cut.code} 的完整内容 1/3】`));
  assert.equal(parts[2]!.split("\n").at(-1), "规则：rm-rf（第 2 行）", "the whole command ends with where each rule matched");
  const body = parts
    .map((part) =>
      part
        .split("\n")
        .slice(1)
        .filter((line) => !line.startsWith("规则："))
        .map((line) => line.slice(2))
        .join(""),
    )
    .join("");
  assert.equal(body, `echo ${"a".repeat(3000)}⏎rm -rf ~ <at id="10001"/> &amp;`, "all of it, in order, markup as text");
  assert.deepEqual(await owner.receive("anon.approval ZZZZZ"), ["找不到审批“ZZZZZ”。用 anon.approvals 查看待审批的请求。"]);
  assert.deepEqual(await harness.stranger().receive(`anon.approval ${cut.code}`), ["这些指令只有主人能用。"]);

  const fetched = await call(harness, "GET", `/operator/approvals/${cut.code}`, undefined, OPERATOR_TOKEN);
  assert.deepEqual([fetched.status, fetched.body.approval.command], [200, long]);
  assert.equal((await call(harness, "GET", "/operator/approvals/ap-none", undefined, OPERATOR_TOKEN)).status, 404);
});

test("a reply quoting the request decides it; other words in such a reply are answered with how to reply and never queued as an instruction", async (t) => {
  const harness = await setup(t);
  const owner = harness.owner();
  const { id, code, message } = await requested(harness);

  const [how] = await owner.receive(`<quote id="${message.id}"/>这个目录里有什么？`);
  assert.match(how ?? "", new RegExp(`这是审批 ${code} 的请求。回复“同意”批准`));
  assert.match(how ?? "", /没有作为指令发给 Pi/);
  assert.deepEqual((await operatorApi(harness).list("s-1")).body.commands, [], "nothing queued");

  assert.deepEqual(await owner.receive(`<quote id="${message.id}"/>拒绝 先备份`), [`已拒绝 ${code}（rm -rf），理由：先备份，决定已发给 Pi。`]);
  const decided = await approvalOf(harness, id);
  assert.deepEqual([decided.state, decided.decision, decided.via], ["decided", "rejected", "chat"]);
  assert.deepEqual(await owner.receive(`<quote id="${message.id}"/>yes`), [`审批 ${code} 已经有了结果：已在聊天中拒绝，正在送达 Pi。这次的回答没有生效。`]);

  const other = await requested(harness);
  assert.deepEqual(await owner.receive(`<quote id="${other.message.id}"/>同意`), [`已批准 ${other.code}（rm -rf），决定已发给 Pi。`]);
  const commands = (await operatorApi(harness).list("s-1")).body.commands as { kind: string }[];
  assert.deepEqual(
    commands.map((c) => c.kind),
    ["approval_decision", "approval_decision"],
    "two decisions and no instruction",
  );
});

test("a stranger, the owner in a group and another plugin acting for the owner are refused, audited, and change nothing", async (t) => {
  const harness = await setup(t);
  const { id, code, message } = await requested(harness);
  // A stranger quoting the request gets what quoting any other message gets (nothing from this plugin), before and after a refusal.
  const quoteOther = await harness.stranger().receive(`<quote id="m-unrelated"/>同意`);
  assert.deepEqual(await harness.stranger().receive(`<quote id="${message.id}"/>同意`), quoteOther);
  assert.deepEqual(await harness.stranger().receive(`anon.approve ${code}`), ["这些指令只有主人能用。"]);
  assert.deepEqual(await harness.stranger().receive(`<quote id="${message.id}"/>同意`), quoteOther);
  assert.deepEqual(await harness.ownerInGroup().receive(`anon.deny ${code}`), ["请在和机器人的私聊中使用这些指令。"]);
  assert.deepEqual(await harness.owner().receive(`请人格代答 anon.approve ${code}`), ["这些指令只能由主人亲自输入。"]);
  assert.deepEqual(await harness.stranger().receive("anon.approvals"), [], "the stranger was answered once; now silent for a while");

  assert.equal((await approvalOf(harness, id)).state, "pending");
  assert.equal(await decisionsQueued(harness), 0);
  const { body } = await operatorApi(harness).audit({ limit: "200" });
  const refused = (body.entries as { action: string; data: { command: string; reason: string; chat: { user_id: string } } }[])
    .filter((e) => e.action === "chat.refused")
    .reverse();
  assert.deepEqual(
    refused.map((e) => [e.data.command, e.data.chat.user_id, e.data.reason]),
    [
      ["anon.approve", STRANGER, "stranger"],
      ["anon.deny", "10001", "group"],
      ["anon.approve", "10001", "not_typed"],
    ],
  );
});
