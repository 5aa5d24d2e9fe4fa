/**
 * The owner's chat commands through a real Koishi app and plugin-mock clients: the owner's
 * private chat, a stranger, and the owner in a group.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import type { Argv, Context } from "koishi";
import { agentApi, operatorApi } from "../../harness/agent-api.ts";
import { OWNER, STRANGER, startChat, type ChatHarness } from "../../harness/chat.ts";
import type { KoishiOptions } from "../../harness/koishi.ts";
import { getReceipt, postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { MUTE_TABLE } from "../../server/mute/store.ts";
import { waitUntil } from "../../harness/wait.ts";
import { AgentStandIn, WorldStateStandIn, worldState } from "./persona-standin.ts";
import { imageOf } from "./images.ts";

async function chat(t: TestContext, options: KoishiOptions = {}): Promise<ChatHarness> {
  const harness = await startChat(options);
  t.after(() => harness.stop());
  return harness;
}

async function auditActions(harness: ChatHarness, prefix: string) {
  const { body } = await operatorApi(harness).audit({ limit: "200" });
  return (body.entries as { action: string; actor: string; data: any }[]).filter((e) => e.action.startsWith(prefix)).reverse();
}

test("only the owner in a private chat is answered; a stranger and the owner in a group are refused and audited", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ session_id: "s-1", runtime_id: "r-1", project: "shop", state: "running", activity: "bash" });

  const [listing] = await harness.owner().receive("anon.sessions");
  assert.match(listing ?? "", /在线会话（1 个）/);
  assert.match(listing ?? "", /#1 shop · .* · 运行中（bash）/);

  assert.deepEqual(await harness.stranger().receive("anon.sessions"), ["这些指令只有主人能用。"]);
  assert.deepEqual(await harness.ownerInGroup().receive("anon.sessions"), ["请在和机器人的私聊中使用这些指令。"]);

  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(
    rows.map((r) => [r.action, r.actor, r.data.command, r.data.chat.user_id, r.data.reason ?? null]),
    [
      ["chat.command", "operator", "anon.sessions", OWNER, null],
      ["chat.refused", "server", "anon.sessions", STRANGER, "stranger"],
      ["chat.refused", "server", "anon.sessions", OWNER, "group"],
    ],
  );
});

test("a stranger's flood: one answer, then silence; one audit row with a bounded excerpt", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ project: "shop" });
  const stranger = harness.stranger();
  const replies: string[][] = [];
  for (let i = 0; i < 200; i++) replies.push(await stranger.receive(`anon.send #1 ${"x".repeat(3000)} ${i}`));
  assert.deepEqual(replies[0], ["这些指令只有主人能用。"]);
  assert.deepEqual(
    replies.slice(1).filter((r) => r.length > 0),
    [],
    "the rest get no answer",
  );
  const rows = await auditActions(harness, "chat.");
  assert.equal(rows.length, 1, "one row for the burst");
  assert.ok(String(rows[0]!.data.input).length <= 260, `excerpt of ${String(rows[0]!.data.input).length} chars`);
  assert.match(String(rows[0]!.data.input), /… \(\d+ chars\)$/);
});

test("typed by the owner is read from the platform event: a forged root execute is refused, the owner's native slash command is served", async (t) => {
  const harness = await chat(t, {
    plugins: (use) =>
      void use((ctx: Context) =>
        ctx.middleware((session, next) =>
          session.content === "伪造" ? session.execute({ name: "anon.send", args: ["#1", "rm -rf ~"], options: {}, root: true } as unknown as Argv) : next(),
        ),
      ),
  });
  const agent = agentApi(harness);
  await agent.heartbeat({ project: "shop" });
  assert.deepEqual(await harness.owner().receive("伪造"), ["这些指令只能由主人亲自输入。"]);
  assert.deepEqual((await agent.claim()).body, { command: null }, "nothing was queued");

  harness.app.mock.receive({
    platform: "mock",
    type: "interaction/command",
    selfId: "514",
    user: { id: OWNER, name: OWNER },
    channel: { id: `private:${OWNER}`, type: 1 },
    argv: { name: "anon.send", arguments: ["#1", "看一下"], options: {} },
  } as never);
  const reply = await waitUntil(() => harness.sent.find((m) => m.text.includes("shop")), "the native command answered");
  assert.match(reply.text, /#1/);
  assert.equal((await agent.claim()).body.command?.instruction, "看一下");
  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(
    rows.map((r) => [r.action, r.data.reason ?? null]),
    [
      ["chat.refused", "not_typed"],
      ["chat.command", null],
    ],
  );
});

test("silent refusals answer nothing and are still audited", async (t) => {
  const harness = await chat(t, { config: { chatRefusal: "silent" } });
  await harness.stranger().shouldNotReply("anon.sessions");
  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(
    rows.map((r) => [r.action, r.data.reason]),
    [["chat.refused", "stranger"]],
  );
});

test("anon.send queues text and an attached image; anon.commands lists it; anon.cancel takes back one not yet claimed and says plainly when it is too late", async (t) => {
  const harness = await chat(t);
  const agent = agentApi(harness);
  await agent.heartbeat({ project: "shop" });
  const png = Buffer.from(imageOf("image/png", 256, 7).data, "base64");
  harness.app.server.get("/test-image.png", (koa) => {
    koa.type = "image/png";
    koa.body = png;
  });
  const imageUrl = `${harness.baseUrl.replace(/\/api\/.*$/, "")}/test-image.png`;
  const owner = harness.owner();

  const [queued] = await owner.receive(`anon.send #1 看看这张截图 <img src="${imageUrl}"/>`);
  const short = /指令 ([0-9a-f]{8})/.exec(queued ?? "")?.[1];
  assert.ok(short, `queued answer names the command: ${queued}`);
  const claimed = await agent.claim();
  assert.equal(claimed.body.command.instruction, "看看这张截图");
  assert.deepEqual(claimed.body.command.images, [{ mime_type: "image/png", data: png.toString("base64") }]);
  assert.equal(claimed.body.command.command_id.slice(2, 10), short);

  const [second] = await owner.receive("anon.send shop 第二条");
  const secondId = /指令 ([0-9a-f]{8})/.exec(second ?? "")![1]!;
  const [listing] = await owner.receive("anon.commands #1");
  assert.match(listing ?? "", new RegExp(`${secondId} · 待送达 · 第二条`));
  assert.match(listing ?? "", new RegExp(`${short} · 送达中 · 看看这张截图`));

  assert.deepEqual(await owner.receive(`anon.cancel ${secondId}`), [`已撤回指令 ${secondId}，它不会送达 Pi。`]);
  assert.deepEqual(await owner.receive(`anon.cancel ${short}`), ["这条指令已经开始送达，不能撤回了。可以再发一条指令更正。"]);
  assert.match((await owner.receive("anon.cancel ffff0000"))[0] ?? "", /找不到指令 ffff0000/);
  assert.match((await owner.receive("anon.send #7 hi"))[0] ?? "", /找不到会话“#7”/);
  assert.equal((await operatorApi(harness).list("s-1")).body.commands.length, 2, "refusals queued nothing");
});

test("a reply quoting a direct notice is an instruction to that notice's session, even while it is offline", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ session_id: "s-2", runtime_id: "r-2", project: "other" });
  const event = validEvent({ session_id: "s-1", delivery: "direct", status: "completed", summary: "测试全部通过" });
  assert.equal((await postEvent(harness, event)).status, 202);
  const receipt = await settledReceipt(harness, String(event.event_id));
  assert.equal(receipt.state, "delivered");
  const notice = harness.sent.find((m) => m.id === receipt.message_id);
  assert.match(notice?.text ?? "", /测试全部通过/);

  const [answer] = await harness.owner().receive(`<quote id="${receipt.message_id}"/>好，再把 lint 也跑一下`);
  assert.match(answer ?? "", /已把你的回复作为指令排队/);
  const { body } = await operatorApi(harness).list("s-1");
  assert.deepEqual(
    body.commands.map((c: { event_id: string; preview: string; origin: string }) => [c.event_id, c.preview, c.origin]),
    [[event.event_id, "好，再把 lint 也跑一下", "operator"]],
  );
  assert.equal((await operatorApi(harness).list("s-2")).body.commands.length, 0);

  // A stranger quoting the same message id changes nothing, and gets what quoting any other message gets.
  assert.deepEqual(
    await harness.stranger().receive(`<quote id="${receipt.message_id}"/>删库`),
    await harness.stranger().receive(`<quote id="m-unrelated"/>删库`),
  );
  assert.equal((await operatorApi(harness).list("s-1")).body.commands.length, 1);
});

const directEvent = (overrides: Record<string, unknown>) => validEvent({ session_id: "s-1", delivery: "direct", ...overrides });

async function untilSent(harness: ChatHarness, count: number, what: string) {
  return waitUntil(() => (harness.sent.length >= count ? harness.sent.slice() : undefined), what);
}

test("while muted a completed notice is held and a failed one breaks through; unmute delivers one digest and the held receipt takes its outcome", async (t) => {
  const harness = await chat(t, {
    plugins: (use) => {
      use(WorldStateStandIn);
      use(AgentStandIn);
    },
  });
  await agentApi(harness).heartbeat({ project: "shop" });
  const owner = harness.owner();
  assert.match((await owner.receive("anon.mute 2h"))[0] ?? "", /已静音全部会话的通知，直到 /);
  assert.equal((await operatorApi(harness).mute()).body.mutes.length, 1);

  const done = directEvent({ status: "completed", summary: "重构完成" });
  const viaPersona = validEvent({ session_id: "s-1", status: "completed", summary: "文档写好了" });
  const failed = directEvent({ status: "failed", summary: "测试失败" });
  for (const event of [done, viaPersona, failed]) assert.equal((await postEvent(harness, event)).status, 202);
  const urgent = await settledReceipt(harness, String(failed.event_id));
  assert.equal(urgent.state, "delivered", "a failed run breaks through the mute");
  const held = await waitUntil(async () => {
    const [a, b] = await Promise.all([getReceipt(harness, String(done.event_id)), getReceipt(harness, String(viaPersona.event_id))]);
    return a?.state === "queued" && b?.state === "queued" ? [a, b] : undefined;
  }, "both non-urgent notices held as queued");
  assert.deepEqual(
    held.map((r) => r.error),
    [null, null],
  );
  assert.match((await owner.receive("anon.status"))[0] ?? "", /静音：全部会话，到 .*（已暂存 2 条）/);
  assert.deepEqual(
    harness.sent.map((m) => m.text.split("\n")[0]),
    ["【Pi Agent 通知 · 失败】"],
  );
  assert.equal(worldState(harness).recorded.length, 0);

  assert.deepEqual(await owner.receive("anon.unmute"), ["静音已结束，静音期间的通知会汇总成一条发给你。"]);
  const sent = await untilSent(harness, 2, "the direct digest");
  assert.match(sent[1]!.text, /^【Pi Agent 通知 · 静音期间 1 条】\n1\. \[完成\] .*重构完成/);
  const receipt = await settledReceipt(harness, String(done.event_id));
  assert.deepEqual([receipt.state, receipt.message_id], ["delivered", sent[1]!.id]);
  const personaReceipt = await settledReceipt(harness, String(viaPersona.event_id));
  assert.equal(personaReceipt.state, "context_injected");
  const blocks = worldState(harness).recorded.map((r) => r.message);
  assert.equal(blocks.length, 1, "one persona digest");
  assert.match(blocks[0]!, /"event_id": "mute-digest:/);
  assert.match(blocks[0]!, /文档写好了/);
  assert.equal((await operatorApi(harness).mute()).body.mutes.length, 0);

  // A reply to the digest reaches the session it came from.
  assert.match((await owner.receive(`<quote id="${sent[1]!.id}"/>继续`))[0] ?? "", /已把你的回复作为指令排队/);
  assert.equal((await operatorApi(harness).list("s-1")).body.commands[0].event_id, done.event_id);
});

test("a mute of one session holds only that session's notices", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ project: "shop" });
  await agentApi(harness).heartbeat({ session_id: "s-2", runtime_id: "r-2", project: "blog" });
  assert.match((await harness.owner().receive("anon.mute 30m shop"))[0] ?? "", /已静音 #\d（shop）的通知/);
  const other = validEvent({ session_id: "s-2", delivery: "direct", status: "completed" });
  const mine = directEvent({ status: "completed" });
  await postEvent(harness, mine);
  await postEvent(harness, other);
  assert.equal((await settledReceipt(harness, String(other.event_id))).state, "delivered");
  assert.equal((await getReceipt(harness, String(mine.event_id)))?.state, "queued");
  assert.match((await harness.owner().receive("anon.mute 8d"))[0] ?? "", /看不懂时长“8d”/);
});

test("mutes survive a restart: a held notice stays held, and a mute whose time ran out while down releases its digest at start", async (t) => {
  const harness = await chat(t);
  await operatorApi(harness).muteSet({ minutes: 60 });
  const held = directEvent({ status: "completed", summary: "夜里跑完了" });
  await postEvent(harness, held);
  await waitUntil(async () => ((await getReceipt(harness, String(held.event_id)))?.state === "queued" ? true : undefined), "held");

  await harness.restart();
  assert.equal((await operatorApi(harness).mute()).body.mutes.length, 1, "the mute is still there");
  const second = directEvent({ status: "completed", summary: "第二条" });
  await postEvent(harness, second);
  await waitUntil(async () => ((await getReceipt(harness, String(second.event_id)))?.state === "queued" ? true : undefined), "held after restart");
  assert.equal(harness.sent.length, 0);

  // The mute's time runs out shortly after the next start: its timer releases both as one digest.
  await harness.app.database.set(MUTE_TABLE, {}, { until: new Date(Date.now() + 300) });
  await harness.restart();
  const [digest] = await untilSent(harness, 1, "the digest after the mute's time ran out");
  assert.match(digest!.text, /静音期间 2 条[\s\S]*夜里跑完了[\s\S]*第二条/);
  for (const event of [held, second]) assert.equal((await settledReceipt(harness, String(event.event_id))).message_id, digest!.id);
});

test("the operator mute routes: set, list, end; bad input is refused", async (t) => {
  const harness = await chat(t);
  const operator = operatorApi(harness);
  const set = await operator.muteSet({ session_id: "s-9", minutes: 5 });
  assert.equal(set.status, 200);
  assert.equal(set.body.mute.session_id, "s-9");
  assert.deepEqual(
    (await operator.mute()).body.mutes.map((m: { session_id: string }) => m.session_id),
    ["s-9"],
  );
  assert.equal((await operator.muteSet({ minutes: 7 * 24 * 60 + 1 })).status, 400);
  assert.deepEqual((await operator.unmute({ session_id: "s-9" })).body, { ended: 1 });
  assert.deepEqual((await operator.unmute({})).body, { ended: 0 });
  const rows = await auditActions(harness, "mute.");
  assert.deepEqual(
    rows.map((r) => [r.action, r.actor]),
    [
      ["mute.set", "operator"],
      ["mute.ended", "operator"],
    ],
  );
});
