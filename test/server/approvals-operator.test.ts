/**
 * Who may answer an approval through the operator API: the pure rule by table, then on a real
 * Koishi app — off by default, refused for a Pi that says it runs as the server's OS user even when
 * opted in, audited as refused with where it came from, and the owner's chat still answers.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call } from "../../harness/agent-api.ts";
import { startChat } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";
import { operatorDecisionRefusal } from "../../server/approvals/decisions.ts";

test("an operator-API decision goes through only when opted in and the asking Pi is not the token's user or root", () => {
  const table: [string, Parameters<typeof operatorDecisionRefusal>[0], string | undefined][] = [
    ["off by default", { optedIn: false, serverUid: 1000, agentUid: 1001 }, "operator_decisions_off"],
    ["off, even for another user", { optedIn: false, serverUid: 1000, agentUid: null }, "operator_decisions_off"],
    ["opted in, the server's own user", { optedIn: true, serverUid: 1000, agentUid: 1000 }, "operator_token_reachable"],
    ["opted in, root", { optedIn: true, serverUid: 1000, agentUid: 0 }, "operator_token_reachable"],
    ["opted in, another user", { optedIn: true, serverUid: 1000, agentUid: 1001 }, undefined],
    ["opted in, a Pi that did not say", { optedIn: true, serverUid: 1000, agentUid: null }, undefined],
    ["opted in, no uids on the server's platform, root Pi", { optedIn: true, serverUid: undefined, agentUid: 0 }, "operator_token_reachable"],
  ];
  for (const [name, facts, expected] of table) assert.equal(operatorDecisionRefusal(facts), expected, name);
});

const decide = (chat: Awaited<ReturnType<typeof startChat>>, id: string) =>
  call(chat, "POST", `/operator/approvals/${id}/decision`, { decision: "approved" }, OPERATOR_TOKEN);

test("the self-approval loop's shape — a POST to the decision route with the operator token — is refused (403) and the owner decides in the chat", async (t) => {
  const chat = await startChat();
  t.after(() => chat.stop());
  await agentApi(chat).heartbeat();
  const created = await call(chat, "POST", "/approvals", approvalRequestOf({ agent_uid: process.getuid?.() ?? 1000 }));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const { approval_id, code } = created.body.approval;

  const loop = await decide(chat, approval_id);
  assert.deepEqual([loop.status, loop.body], [403, { error: "operator_decisions_off" }]);
  const still = await call(chat, "GET", `/operator/approvals/${approval_id}`, undefined, OPERATOR_TOKEN);
  assert.equal(still.body.approval.state, "pending", "the call stays pending");

  assert.deepEqual(await chat.owner().receive(`anon.approve ${code}`), [`已批准 ${code}（rm -rf），决定已发给 Pi。`]);
  await call(chat, "POST", `/approvals/${approval_id}/resolution`, { session_id: "s-1", runtime_id: "r-1", outcome: "approved", via: "chat", reason: null });
  const closing = await waitUntil(() => chat.sent.find((m) => m.text.includes(`${code} 已结束`)), "the closing message");
  assert.equal(closing.text, `【Pi 审批 ${code} 已结束】rm -rf：已在聊天中批准，命令已放行。`);

  const audit = await call(chat, "GET", "/operator/audit?session_id=s-1&limit=100", undefined, OPERATOR_TOKEN);
  const rows = audit.body.entries as { action: string; data: { via?: string; error?: string } }[];
  assert.deepEqual(
    rows.filter((e) => e.action === "approval.refused").map((e) => [e.data.via, e.data.error]),
    [["operator", "operator_decisions_off"]],
  );
  assert.deepEqual(
    rows.filter((e) => e.action === "approval.decided" || e.action === "approval.resolved").map((e) => [e.action, e.data.via]),
    [
      ["approval.resolved", "chat"],
      ["approval.decided", "chat"],
    ],
  );
});

test("opted in: refused while the Pi says it runs as the server's OS user, accepted for another user, and the closing says where", async (t) => {
  const chat = await startChat({ config: { approvalOperatorDecisions: true } });
  t.after(() => chat.stop());
  const uid = process.getuid?.();
  if (uid === undefined) return t.skip("no OS user ids on this platform");
  await agentApi(chat).heartbeat();
  const same = (await call(chat, "POST", "/approvals", approvalRequestOf({ tool_call_id: "c-same", agent_uid: uid }))).body.approval;
  assert.deepEqual((await decide(chat, same.approval_id)).body, { error: "operator_token_reachable" });
  const other = (await call(chat, "POST", "/approvals", approvalRequestOf({ tool_call_id: "c-other", agent_uid: uid + 1 }))).body.approval;
  const accepted = await decide(chat, other.approval_id);
  assert.deepEqual([accepted.status, accepted.body.approval.via], [200, "operator"]);
  await call(chat, "POST", `/approvals/${other.approval_id}/resolution`, {
    session_id: "s-1",
    runtime_id: "r-1",
    outcome: "approved",
    via: "operator",
    reason: null,
  });
  const closing = await waitUntil(() => chat.sent.find((m) => m.text.includes(`${other.code} 已结束`)), "the closing message");
  assert.equal(closing.text, `【Pi 审批 ${other.code} 已结束】rm -rf：已通过运维接口批准，命令已放行。`);
});

test("a request whose command the client cut is refused whole (400 command_incomplete); one past the limit is refused too", async (t) => {
  const chat = await startChat();
  t.after(() => chat.stop());
  await agentApi(chat).heartbeat();
  const cut = await call(chat, "POST", "/approvals", approvalRequestOf({ command: "rm -rf build; echo ok … echo done", command_hidden_chars: 6000 }));
  assert.deepEqual([cut.status, cut.body], [400, { error: "command_incomplete" }]);
  const long = await call(chat, "POST", "/approvals", approvalRequestOf({ command: `rm -rf build; ${"echo ok; ".repeat(2000)}` }));
  assert.equal(long.status, 400);
  assert.equal(long.body.error, "invalid_request");
  const listed = await call(chat, "GET", "/operator/approvals?state=all", undefined, OPERATOR_TOKEN);
  assert.deepEqual(listed.body.approvals, [], "nothing stored in part");
});
