/**
 * The owner's chat commands through a real Koishi app and plugin-mock clients: the owner's
 * private chat, a stranger, and the owner in a group.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import { agentApi, operatorApi } from "../../harness/agent-api.ts";
import { OWNER, STRANGER, startChat, type ChatHarness } from "../../harness/chat.ts";
import type { KoishiOptions } from "../../harness/koishi.ts";
import { postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
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

test("silent refusals answer nothing and are still audited", async (t) => {
  const harness = await chat(t, { config: { chatRefusal: "silent" } });
  await harness.stranger().shouldNotReply("anon.sessions");
  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(rows.map((r) => [r.action, r.data.reason]), [["chat.refused", "stranger"]]);
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
  assert.deepEqual(body.commands.map((c: { event_id: string; preview: string; origin: string }) => [c.event_id, c.preview, c.origin]), [[event.event_id, "好，再把 lint 也跑一下", "operator"]]);
  assert.equal((await operatorApi(harness).list("s-2")).body.commands.length, 0);

  // A stranger quoting the same message id changes nothing.
  assert.deepEqual(await harness.stranger().receive(`<quote id="${receipt.message_id}"/>删库`), ["这些指令只有主人能用。"]);
  assert.equal((await operatorApi(harness).list("s-1")).body.commands.length, 1);
});
