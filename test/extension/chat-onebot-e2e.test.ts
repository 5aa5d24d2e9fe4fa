/**
 * QQ end to end: a REAL Pi session with this extension, the REAL notify-webhook plugin in Koishi,
 * and the REAL OneBot adapter against the loopback fake (test/helpers/fake-onebot.ts). The owner
 * switches on after the friend check, steers the session with text full of markup, and denies an
 * approval with such a reason; the model reads every word as typed.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { operatorApi } from "../../harness/agent-api.ts";
import { listedOnline, piOnServer } from "../../harness/extension-env.ts";
import { settledReceipt } from "../../harness/event-client.ts";
import { ai, answerableTerminal, lastUserText, toolResults, type StartPiOptions } from "../../harness/pi.ts";
import { settled } from "../../harness/session-commands.ts";
import { waitUntil } from "../../harness/wait.ts";
import { reply, text } from "../helpers/fake-onebot.ts";
import { OWNER, startOneBotChat } from "../helpers/onebot-chat.ts";
import { probe } from "../helpers/probe.ts";

async function piOnQq(t: TestContext, options: Omit<StartPiOptions, "root"> & { userConfig?: Record<string, unknown>; friends?: string[] } = {}) {
  const { friends, ...piOptions } = options;
  const chat = await startOneBotChat(friends ? { friends } : {});
  const pi = await piOnServer(t, chat, piOptions);
  return { chat, pi };
}

const TYPED = "fix the <Header> component, then check a < b && c > d";

test("on QQ: /anon-notify switches on for a friend; anon.send and a quote reply reach the model whole", { timeout: 90_000 }, async (t) => {
  const observer = probe();
  const { chat, pi } = await piOnQq(t, { extensions: [observer.extension] });
  await pi.prompt("/anon-notify");
  const sessionId = pi.session.sessionManager.getSessionId();
  await listedOnline(chat, pi);
  assert.equal(chat.onebot.received("get_friend_list").length, 1, "the friend check asked QQ's friend list");

  pi.script([ai.fauxAssistantMessage("好的")]);
  const answered = settled(pi);
  const [queued] = await chat.exchange(`anon.send #1 ${TYPED}`);
  assert.match(queued!.text, /已排队给 #1/);
  await answered;
  assert.equal(lastUserText(pi), TYPED);

  observer.send({ status: "info", summary: "部署完成 <prod> & 继续？", eventId: "deploy-1", delivery: "direct" });
  const receipt = await waitUntil(
    async () => {
      const current = await settledReceipt(chat, `ext:${sessionId}:deploy-1`).catch(() => undefined);
      return current?.state === "delivered" ? current : undefined;
    },
    "the direct notice delivered",
    15_000,
  );
  const notice = chat.onebot.sent.find((m) => String(m.messageId) === receipt.message_id)!;
  assert.deepEqual(
    notice.segments.map((s) => s.type),
    ["text"],
  );
  assert.match(notice.text, /部署完成 <prod> & 继续？/);

  pi.script([ai.fauxAssistantMessage("继续")]);
  const steered = settled(pi);
  const answer = "继续，但先看 <Footer> && 日志 [CQ:at,qq=all]";
  const [ack] = await chat.exchange([reply(notice.messageId), text(answer)], { format: "string" });
  assert.match(ack!.text, /deploy-1/);
  await steered;
  assert.equal(lastUserText(pi), answer);
});

test("on QQ: /anon-notify is refused when Anon has not added the owner", { timeout: 60_000 }, async (t) => {
  const { chat, pi } = await piOnQq(t, { friends: [] });
  await pi.prompt("/anon-notify");
  assert.ok(
    pi.notices().some((n) => n.includes(`尚未添加目标 QQ ${OWNER}`)),
    `refused with the reason: ${JSON.stringify(pi.notices())}`,
  );
  assert.deepEqual((await operatorApi(chat).sessions()).body.sessions, [], "not switched on");
});

test("on QQ: an approval denied by text with a reason full of markup: nothing runs, the model reads the reason whole", { timeout: 90_000 }, async (t) => {
  const term = answerableTerminal();
  const { chat, pi } = await piOnQq(t, { ui: term.ui, userConfig: { language: "zh-CN", approval: { enabled: true } } });
  await pi.prompt("/anon-notify");
  const build = join(pi.cwd, "build");
  mkdirSync(build, { recursive: true });
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好的")]);
  const run = pi.prompt("清理构建目录");
  const request = await waitUntil(() => chat.onebot.sent.find((m) => /【Pi 审批 [A-Z]{5}】/.test(m.text)), "the approval request on QQ", 30_000);
  const code = /审批 ([A-Z]{5})/.exec(request.text)![1]!;

  const reason = 'too risky: a < b && "c" <build/>';
  await chat.exchange(`anon.deny ${code} ${reason}`);
  // Found by its words: the closing message may come first once Pi has the decision.
  const denied = await waitUntil(() => chat.onebot.sent.find((m) => m.text.startsWith(`已拒绝 ${code}`)), "the deny confirmation");
  assert.equal(denied.text, `已拒绝 ${code}（rm -rf），理由：${reason}，决定已发给 Pi。`);
  await run;
  assert.equal(existsSync(build), true, "denied: nothing ran");
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.ok(result!.text.includes(`理由：${reason}`), result!.text);
});
