/**
 * The owner's chat with real parts end to end: plugin-mock chat clients on a real Koishi app with
 * notify-webhook, and a REAL Pi session with this extension switched on. The owner lists sessions,
 * sends text and an image, answers a direct notice by quoting it, and takes back an instruction
 * before the session's next turn boundary.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { ai } from "../../harness/pi.ts";
import { commandMessages, gatedTool, settled } from "../../harness/session-commands.ts";
import { operatorApi } from "../../harness/agent-api.ts";
import { settledReceipt } from "../../harness/event-client.ts";
import { imageOf } from "../server/images.ts";
import { piOnChat } from "../helpers/pi-chat.ts";
import { probe } from "../helpers/probe.ts";
import { waitUntil } from "../../harness/wait.ts";

async function setup(t: TestContext) {
  const slow = gatedTool("slow");
  const observer = probe();
  const { chat, pi } = await piOnChat(t, { tools: [slow.tool], extensions: [observer.extension] });
  await pi.prompt("/anon-notify");
  const sessionId = pi.session.sessionManager.getSessionId();
  await waitUntil(
    async () => (await operatorApi(chat).sessions()).body.sessions.find((s: { session_id: string }) => s.session_id === sessionId),
    "session online",
    5_000,
  );
  return { chat, pi, slow, observer, sessionId, owner: chat.owner() };
}

test("from the owner's chat: list, send text and an image, answer a direct notice by quoting it", { timeout: 60_000 }, async (t) => {
  const { chat, pi, observer, sessionId, owner } = await setup(t);
  const [listing] = await owner.receive("anon.sessions");
  assert.match(listing ?? "", /#1 work · faux\/faux-1 · 空闲 .*可收图片/);

  const png = Buffer.from(imageOf("image/png", 128, 5).data, "base64");
  chat.app.server.get("/shot.png", (koa) => {
    koa.type = "image/png";
    koa.body = png;
  });
  pi.script([ai.fauxAssistantMessage("看到了，是登录页。")]);
  const answered = settled(pi);
  const [queued] = await owner.receive(`anon.send #1 这个页面哪里不对？<img src="${chat.baseUrl.replace(/\/api\/.*$/, "")}/shot.png"/>`);
  assert.match(queued ?? "", /已排队给 #1（work）/);
  await answered;
  const seen = pi.modelCalls.at(-1)!.messages.at(-1)!;
  assert.equal(seen.role, "user");
  assert.deepEqual(
    (seen.content as { type: string; text?: string; data?: string }[]).map((c) =>
      c.type === "text" ? c.text : `${c.type}:${c.data === png.toString("base64")}`,
    ),
    ["这个页面哪里不对？", "image:true"],
  );

  // Another extension asks for a direct notice; the owner answers it by quoting it in the chat.
  observer.send({ status: "info", summary: "部署完成，要继续吗？", eventId: "deploy-1", delivery: "direct" });
  const eventId = `ext:${sessionId}:deploy-1`;
  const receipt = await waitUntil(
    async () => {
      const current = await settledReceipt(chat, eventId).catch(() => undefined);
      return current?.state === "delivered" ? current : undefined;
    },
    "the direct notice delivered",
    10_000,
  );
  assert.match(chat.sent.find((m) => m.id === receipt.message_id)?.text ?? "", /部署完成，要继续吗？/);
  pi.script([ai.fauxAssistantMessage("好的，继续部署到生产环境。")]);
  const replied = settled(pi);
  const [ack] = await owner.receive(`<quote id="${receipt.message_id}"/>继续，部署到生产`);
  assert.match(ack ?? "", new RegExp(`通知 ${eventId.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`));
  await replied;
  const delivered = commandMessages(pi).map((m) => m.details as { command_id: string; event_id?: string });
  assert.equal(delivered.length, 2);
  const last = pi.modelCalls.at(-1)!.messages.at(-1)!;
  assert.deepEqual(last.content, [{ type: "text", text: "继续，部署到生产" }]);
  const { body } = await operatorApi(chat).list(sessionId);
  assert.equal(body.commands[0].event_id, eventId, "the quoted notice's event");
});

test("from the owner's chat: an instruction taken back before the turn boundary never reaches the session", { timeout: 60_000 }, async (t) => {
  const { pi, slow, sessionId, owner, chat } = await setup(t);
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("长任务完成。"),
    ai.fauxAssistantMessage("收到"),
  ]);
  const run = pi.prompt("开始一个长任务");
  await slow.started;
  const [queued] = await owner.receive("anon.send #1 把数据库删掉");
  const short = /指令 ([0-9a-f]{8})/.exec(queued ?? "")?.[1];
  assert.ok(short, queued);
  assert.deepEqual(await owner.receive(`anon.cancel ${short}`), [`已撤回指令 ${short}，它不会送达 Pi。`]);
  slow.release();
  await run;
  await pi.session.waitForIdle();
  assert.deepEqual(commandMessages(pi), [], "nothing reached the session");
  const { body } = await operatorApi(chat).list(sessionId);
  assert.deepEqual(
    body.commands.map((c: { state: string }) => c.state),
    ["cancelled"],
  );
});

test("from the owner's chat: anon.stop interrupts a running bash tool with one confirmation and no completion notice; an idle session is said to be idle", {
  timeout: 90_000,
}, async (t) => {
  const { chat, pi, sessionId, owner } = await setup(t);
  assert.match((await owner.receive("anon.stop #1"))[0] ?? "", /#1（work）当时没有在运行/);

  const marker = join(pi.root, "finished");
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: `echo started > '${marker}.start'; sleep 60; echo done > '${marker}'` })], {
      stopReason: "toolUse",
    }),
    ai.fauxAssistantMessage("这句不应出现"),
  ]);
  const run = pi.prompt("跑一个很久的命令");
  await waitUntil(() => existsSync(`${marker}.start`), "the bash tool started", 30_000);
  const replies = await owner.receive("anon.stop #1");
  assert.equal(replies.length, 1, "one confirmation");
  assert.match(replies[0]!, /已打断 #1（work）正在进行的运行/);
  await run;
  await pi.session.waitForIdle();
  assert.ok(!existsSync(marker), "the tool was killed before it finished");
  const { entries } = (await operatorApi(chat).audit({ session_id: sessionId, limit: "200" })).body as {
    entries: { action: string; data: { event?: { status: string } } }[];
  };
  const statuses = entries.filter((e) => e.action === "event.accepted").map((e) => e.data.event!.status);
  assert.ok(!statuses.includes("completed"), `no completion notice for the stopped run (${statuses.join(", ")})`);
});
