/**
 * The owner's scenarios on QQ through the real OneBot adapter (koishi-plugin-adapter-onebot 6.9.4,
 * forward WebSocket) against the loopback fake, whose recorded actions are asserted: the segments
 * of `send_private_msg`, the friend list, `get_msg` for quote replies.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import fc from "fast-check";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call } from "../../harness/agent-api.ts";
import { postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";
import { reply, text, type Segment } from "../helpers/fake-onebot.ts";
import { markupText } from "../helpers/markup-text.ts";
import { GROUP, OWNER, STRANGER, startOneBotChat, type OneBotChat } from "../helpers/onebot-chat.ts";

async function onebotChat(t: TestContext, options: Parameters<typeof startOneBotChat>[0] = {}): Promise<OneBotChat> {
  const chat = await startOneBotChat(options);
  t.after(() => chat.stop());
  return chat;
}

/** The one text segment a message must be; anything else (a CQ code, an element) fails. */
function onlyText(segments: Segment[]): string {
  assert.equal(segments.length, 1, JSON.stringify(segments));
  assert.equal(segments[0]!.type, "text", JSON.stringify(segments));
  return String(segments[0]!.data.text);
}

/** A direct notice with `summary`, delivered; answers the message the fake received. */
async function directNotice(chat: OneBotChat, summary: string) {
  const before = chat.onebot.countTo(`private:${OWNER}`);
  const event = validEvent({ delivery: "direct", summary, session_id: "s-1" });
  assert.equal((await postEvent(chat, event)).status, 202);
  const receipt = await settledReceipt(chat, String(event.event_id));
  assert.equal(receipt.state, "delivered", receipt.error ?? "");
  const [sent] = await chat.onebot.sendsTo(`private:${OWNER}`, before);
  assert.equal(String(sent!.messageId), receipt.message_id);
  return { eventId: String(event.event_id), sent: sent! };
}

/** The instruction the extension would claim next for session s-1, acknowledged so the queue is empty again. */
async function claimedInstruction(chat: OneBotChat) {
  const agent = agentApi(chat);
  const claimed = await agent.claim("s-1", "r-1", { waitMs: 0 });
  assert.ok(claimed.body.command, `a command is queued (${JSON.stringify(claimed.body)})`);
  await agent.ack(claimed.body.command.command_id, claimed.body.lease.token);
  return claimed.body.command as { instruction: string; event_id: string };
}

test("onebot: a direct notice is one text segment to the owner; agent markup and CQ codes stay text, nothing is fetched", async (t) => {
  const chat = await onebotChat(t);
  const summary = 'done <at type="all"/> [CQ:at,qq=all] <img src="http://127.0.0.1:9/x.png"/> a < b && c > d &amp; "q"';
  const { sent } = await directNotice(chat, summary);
  const action = chat.onebot.received("send_private_msg").at(-1)!;
  assert.equal(action.params.user_id, Number(OWNER), "QQ numbers go out as numbers");
  const words = onlyText(sent.segments);
  assert.ok(words.includes(summary), words);
  assert.ok(!/&lt;|&gt;|&amp;amp;/.test(words.replace(summary, "")), words);
  assert.deepEqual(
    chat.onebot.actions.map((a) => a.action).filter((a) => a !== "send_private_msg"),
    ["get_login_info", "get_guild_service_profile"],
    "no image fetched, no other action",
  );
});

test("onebot over reverse WebSocket: the implementation connects to Koishi's /onebot; notice, friend check and anon.* work the same", async (t) => {
  const chat = await onebotChat(t, { mode: "ws-reverse" });
  const { sent } = await directNotice(chat, "done <b>x</b>");
  assert.ok(onlyText(sent.segments).includes("done <b>x</b>"));
  assert.equal((await call(chat, "GET", "/recipient")).body.status, "ok");
  await agentApi(chat).heartbeat({ project: "shop" });
  const [listing] = await chat.exchange("anon.sessions");
  assert.match(onlyText(listing!.segments), /#1 shop/);
});

test("onebot: the friend check is ok for a real friend and not_added for anyone else", async (t) => {
  const friend = await onebotChat(t);
  const ok = await call(friend, "GET", "/recipient");
  assert.deepEqual([ok.status, ok.body.status, ok.body.qq, ok.body.anon_qq], [200, "ok", OWNER, "10002"]);
  assert.equal(friend.onebot.received("get_friend_list").length, 1);

  const stranger = await onebotChat(t, { friends: [STRANGER] });
  const missing = await call(stranger, "GET", "/recipient");
  assert.deepEqual([missing.body.status, missing.body.reason], ["not_added", "not_in_friend_list"]);
});

test("onebot: anon.* typed as text; a stranger and a group are refused; every reply is escaped once", async (t) => {
  const chat = await onebotChat(t);
  await agentApi(chat).heartbeat({ project: "shop", state: "running", activity: '<b>bash</b> & "x"' });
  const [listing] = await chat.exchange("anon.sessions");
  const words = onlyText(listing!.segments);
  assert.match(words, /#1 shop · faux\/model · 运行中（<b>bash<\/b> & "x"）/);
  assert.doesNotMatch(words, /&lt;|&gt;|&amp;|&quot;/);
  assert.match(words, /用 anon\.send #1 <指令> 发指令/, "the texts' own markup-like words come out as written");

  const [refused] = await chat.exchange("anon.sessions", { from: STRANGER });
  assert.equal(onlyText(refused!.segments), "这些指令只有主人能用。");
  const [group] = await chat.exchange("anon.sessions", { group: GROUP });
  assert.equal(onlyText(group!.segments), "请在和机器人的私聊中使用这些指令。");
  assert.equal(chat.onebot.received("send_group_msg").at(-1)!.params.group_id, Number(GROUP));
  assert.equal(await claimNothing(chat), true);
});

async function claimNothing(chat: OneBotChat) {
  const claimed = await agentApi(chat).claim("s-1", "r-1", { waitMs: 0 });
  return claimed.body.command === null;
}

for (const format of ["array", "string"] as const) {
  test(`onebot (${format} messages): the owner's text with <…>, & and quotes is queued whole, by anon.send and by a quote reply`, async (t) => {
    const chat = await onebotChat(t);
    await agentApi(chat).heartbeat({ project: "shop" });
    const typed = 'fix the <Header> component, then check a < b && c > d; run `echo "<b>" && ls [x]`';
    const [queued] = await chat.exchange(`anon.send #1 ${typed}`, { format });
    assert.match(onlyText(queued!.segments), /已排队给 #1（shop）/);
    assert.equal((await claimedInstruction(chat)).instruction, typed);

    const { eventId, sent } = await directNotice(chat, "部署完成，要继续吗？");
    const answer = "继续 <Header> & 部署";
    const [ack] = await chat.exchange([reply(sent.messageId), text(answer)], { format });
    assert.match(onlyText(ack!.segments), new RegExp(`通知 ${eventId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
    assert.deepEqual(
      chat.onebot.received("get_msg").map((a) => a.params.message_id),
      [sent.messageId],
      "the quoted message is looked up by its id",
    );
    const steered = await claimedInstruction(chat);
    assert.deepEqual([steered.instruction, steered.event_id], [answer, eventId]);
  });
}

/** Posts an approval request for session s-1 and waits until the owner got it on QQ. */
async function requested(chat: OneBotChat) {
  const created = await call(chat, "POST", "/approvals", approvalRequestOf({ tool_call_id: `call-${randomUUID()}`, cwd: "/home/u/shop" }));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const code: string = created.body.approval.code;
  const request = await waitUntil(() => chat.onebot.sent.find((m) => m.text.includes(`审批 ${code}】`)), `the request ${code} on QQ`);
  onlyText(request.segments);
  return { id: created.body.approval.approval_id as string, code, request };
}

async function approvalOf(chat: OneBotChat, id: string) {
  const list = await call(chat, "GET", "/operator/approvals?state=all", undefined, OPERATOR_TOKEN);
  return (list.body.approvals as { approval_id: string; state: string; decision: string | null; decided_by: string | null }[]).find(
    (a) => a.approval_id === id,
  )!;
}

/** The decision the extension claims next on the control lane, acknowledged as applied. */
async function decisionPayload(chat: OneBotChat, { id, code }: { id: string; code: string }) {
  const agent = agentApi(chat);
  const claimed = await agent.claim("s-1", "r-1", { waitMs: 0, lane: "control" });
  assert.equal(claimed.body.command?.payload?.approval_id, id, JSON.stringify(claimed.body));
  await agent.ack(claimed.body.command.command_id, claimed.body.lease.token, "s-1", "r-1", "applied");
  const payload = claimed.body.command.payload as { decision: "approved" | "rejected"; reason: string | null };
  // The extension's word closes it, so it no longer counts as open.
  await call(chat, "POST", `/approvals/${id}/resolution`, {
    session_id: "s-1",
    runtime_id: "r-1",
    outcome: payload.decision,
    via: "chat",
    reason: payload.reason,
  });
  // Its closing message comes on its own; waited for, so it is never taken for the answer to what the owner types next.
  await waitUntil(() => chat.onebot.sent.some((m) => m.text.includes(`审批 ${code} 已结束】`)), `the closing message of ${code}`);
  return payload;
}

test("onebot: approve and deny by text, by command and by quoting the request; the reason arrives whole and is shown once escaped", async (t) => {
  const chat = await onebotChat(t);
  await agentApi(chat).heartbeat({ project: "shop" });

  const first = await requested(chat);
  const [approved] = await chat.exchange(`anon.approve ${first.code}`);
  assert.equal(onlyText(approved!.segments), `已批准 ${first.code}（rm -rf），决定已发给 Pi。`);
  assert.deepEqual((({ state, decision, decided_by }) => [state, decision, decided_by])(await approvalOf(chat, first.id)), [
    "decided",
    "approved",
    "chat:onebot:10001",
  ]);
  assert.equal((await decisionPayload(chat, first)).decision, "approved");

  const second = await requested(chat);
  const reason = 'too risky: a < b && "c" <b>';
  const [denied] = await chat.exchange(`anon.deny ${second.code} ${reason}`);
  assert.equal(onlyText(denied!.segments), `已拒绝 ${second.code}（rm -rf），理由：${reason}，决定已发给 Pi。`);
  assert.equal((await decisionPayload(chat, second)).reason, reason, "the reason reaches Pi whole");

  const third = await requested(chat);
  const [byQuote] = await chat.exchange([reply(third.request.messageId), text("拒绝 先备份 <db> & 日志")], { format: "string" });
  assert.equal(onlyText(byQuote!.segments), `已拒绝 ${third.code}（rm -rf），理由：先备份 <db> & 日志，决定已发给 Pi。`);
  assert.equal((await decisionPayload(chat, third)).reason, "先备份 <db> & 日志");
  const fourth = await requested(chat);
  const [yes] = await chat.exchange([reply(fourth.request.messageId), text("同意")]);
  assert.equal(onlyText(yes!.segments), `已批准 ${fourth.code}（rm -rf），决定已发给 Pi。`);

  const [stranger] = await chat.exchange(`anon.approve ${first.code}`, { from: STRANGER });
  assert.equal(onlyText(stranger!.segments), "这些指令只有主人能用。");
});

test("onebot: a refused send keeps its cause in the receipt: the retcode first, not the message text", async (t) => {
  const chat = await onebotChat(t, { config: { injectMaxAttempts: 1 } });
  chat.onebot.failSends = { retcode: 1200, wording: "发送消息失败" };
  const event = validEvent({ delivery: "direct", summary: "长".repeat(400) });
  await postEvent(chat, event);
  const receipt = await settledReceipt(chat, String(event.event_id));
  assert.equal(receipt.state, "failed");
  assert.match(receipt.error ?? "", /^send_failed: 机器人发送失败：retcode 1200 \(send_private_msg\)/);
  assert.doesNotMatch(receipt.error ?? "", /长/, "the message text is not the cause");
});

test("onebot, generated text: what the owner types reaches the queue byte-equal, and what the agent writes arrives as one text segment", async (t) => {
  const chat = await onebotChat(t, {
    config: {
      eventsPerMinute: 6000,
      eventBurst: 1000,
      heartbeatsPerMinute: 6000,
      heartbeatBurst: 1000,
      heartbeatsTotalPerMinute: 6000,
      heartbeatTotalBurst: 1000,
    },
  });
  await agentApi(chat).heartbeat({ project: "shop" });
  await fc.assert(
    fc.asyncProperty(markupText, fc.constantFrom("array", "string") as fc.Arbitrary<"array" | "string">, async (typed, format) => {
      const [queued] = await chat.exchange(`anon.send #1 ${typed}`, { format });
      assert.match(onlyText(queued!.segments), /已排队给 #1/);
      assert.equal((await claimedInstruction(chat)).instruction, typed);
    }),
    { numRuns: 60 },
  );
  await fc.assert(
    fc.asyncProperty(markupText, async (written) => {
      const { sent } = await directNotice(chat, written);
      assert.ok(onlyText(sent.segments).includes(written));
    }),
    { numRuns: 30 },
  );
  // A reply quoting what the agent reported (its activity) shows it as it was sent, escaped once.
  await fc.assert(
    fc.asyncProperty(markupText, async (activity) => {
      assert.equal((await agentApi(chat).heartbeat({ project: "shop", state: "running", activity })).status, 200);
      const [listing] = await chat.exchange("anon.sessions");
      assert.ok(onlyText(listing!.segments).includes(`运行中（${activity}）`), listing!.text);
    }),
    { numRuns: 30 },
  );
});
