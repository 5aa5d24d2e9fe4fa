/**
 * Approvals answered by a button press, end to end through real parts: a REAL Pi session (SDK, faux
 * model calling `bash` with `rm -rf build`), the REAL notify-webhook plugin in Koishi, and the REAL
 * Telegram and Discord adapters against loopback fakes of their APIs, whose recorded payloads are
 * asserted: keyboards and components, callback answers, edits. The terminal dialog stays open.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { ai, answerableTerminal, toolResults } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { DISCORD_OWNER, DISCORD_STRANGER, TELEGRAM_OWNER, TELEGRAM_STRANGER, startDiscordChat, startTelegramChat } from "../helpers/adapter-chat.ts";

const BUTTON_ID = /^an:(y|n|g\d+):([A-Z]{5}):[0-9a-f]{8}$/;

/** Pi with approvals on, pointed at `chat`; the model's `rm -rf build` waits for an answer. */
async function asking(t: TestContext, chat: KoishiHarness, approval: Record<string, unknown> = {}) {
  const term = answerableTerminal();
  const pi = await piOnServer(t, chat, { ui: term.ui, userConfig: { language: "zh-CN", approval: { enabled: true, ...approval } } });
  await pi.prompt("/anon-notify");
  const build = join(pi.cwd, "build");
  mkdirSync(build, { recursive: true });
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好的")]);
  const run = pi.prompt("清理构建目录");
  return { pi, term, build, run, sessionId: pi.session.sessionManager.getSessionId() };
}

async function approvalState(chat: KoishiHarness, sessionId: string): Promise<string> {
  const { body } = await call(chat, "GET", `/operator/approvals?state=all&session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
  return body.approvals[0].state;
}

async function auditActions(chat: KoishiHarness): Promise<{ action: string; data: Record<string, any> }[]> {
  return (await call(chat, "GET", "/operator/audit?limit=200", undefined, OPERATOR_TOKEN)).body.entries;
}

test("Telegram: the request carries Approve and Deny; a stranger's press does nothing (audited), the owner's runs the command and edits the request, a second press hears it is decided", {
  timeout: 120_000,
}, async (t) => {
  const chat = await startTelegramChat();
  const tg = chat.fake;
  const { pi, build, run, sessionId } = await asking(t, chat);
  const request = await tg.waitFor("sendMessage", (b) => /【Pi 审批 [A-Z]{5}】/.test(b.text), "the approval request");
  const code = /审批 ([A-Z]{5})/.exec(request.body.text)![1]!;
  const keyboard = request.body.reply_markup.inline_keyboard as { text: string; callback_data: string }[][];
  assert.deepEqual(
    keyboard.flat().map((b) => b.text),
    ["批准", "拒绝"],
  );
  for (const button of keyboard.flat()) {
    assert.match(button.callback_data, BUTTON_ID);
    assert.equal(BUTTON_ID.exec(button.callback_data)![2], code);
    assert.ok(Buffer.byteLength(button.callback_data) <= 64, button.callback_data);
  }
  assert.match(request.body.text, /批准：anon\.approve [A-Z]{5}/, "the typed answer stays in the text");
  const requestId = [...tg.messages.values()].find((m) => m.text === request.body.text)!.message_id;
  const [approve, deny] = keyboard[0]!.map((b) => b.callback_data);

  const sentBefore = tg.calls.filter((c) => c.method === "sendMessage").length;
  await tg.press(TELEGRAM_STRANGER, requestId, approve!);
  const ack = await tg.waitFor("answerCallbackQuery", () => true, "the stranger's press acknowledged");
  // The adapter acknowledges every press itself, with no text: whatever the press came to is said in the chat.
  assert.deepEqual(Object.keys(ack.body), ["callback_query_id"]);
  const refused = await waitUntil(
    async () => (await auditActions(chat)).find((e) => e.action === "chat.refused" && e.data.command === "button"),
    "the stranger's press on the trail",
  );
  assert.equal(refused.data.reason, "stranger");
  assert.equal(refused.data.chat.user_id, String(TELEGRAM_STRANGER.id));
  assert.equal(await approvalState(chat, sessionId), "pending", "the stranger changed nothing");
  assert.equal(tg.calls.filter((c) => c.method === "sendMessage").length, sentBefore, "and got no answer");

  await tg.press(TELEGRAM_OWNER, requestId, approve!);
  const confirmed = await tg.waitFor("sendMessage", (b) => b.text.startsWith(`已批准 ${code}`), "the owner's confirmation");
  assert.equal(confirmed.body.text, `已批准 ${code}（rm -rf），决定已发给 Pi。`);
  assert.equal(String(confirmed.body.chat_id), String(TELEGRAM_OWNER.id));
  const edit = await tg.waitFor("editMessageText", (b) => b.message_id === requestId, "the request edited");
  // Edited once decided: Pi may have taken the decision already, or not yet.
  assert.match(
    edit.body.text,
    new RegExp(`^【Pi 审批 ${code}】rm -rf：已在聊天中批准(，正在送达 Pi)?（chat:telegram:${TELEGRAM_OWNER.id}）\\n┃ rm -rf build$`),
  );
  assert.equal(edit.body.reply_markup, undefined, "edited without a keyboard");
  assert.equal(tg.messages.get(requestId)!.reply_markup, undefined, "so the buttons are gone");
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false],
  );
  const decided = (await auditActions(chat)).find((e) => e.action === "approval.decided");
  assert.deepEqual([decided?.data.by, decided?.data.via], [`chat:telegram:${TELEGRAM_OWNER.id}`, "chat"]);

  await tg.press(TELEGRAM_OWNER, requestId, deny!);
  const late = await tg.waitFor("sendMessage", (b) => b.text.startsWith(`审批 ${code} 已经有了结果`), "the late press answered");
  assert.match(late.body.text, /已在聊天中批准.*这次的回答没有生效。$/);
  // The native command, typed in its flat name, is answered the same way.
  await tg.privateMessage(TELEGRAM_OWNER, `/anon_approve ${code}`);
  const typed = await tg.waitFor("sendMessage", (b) => b.text.startsWith(`审批 ${code} 已经有了结果`) && b !== late.body, "/anon_approve answered");
  assert.match(typed.body.text, /这次的回答没有生效。$/);
});

test("Telegram: Deny refuses the call; the grant button appears where the rule is grantable; /anon_sessions answers the owner in the menu's flat name", {
  timeout: 120_000,
}, async (t) => {
  const chat = await startTelegramChat();
  const tg = chat.fake;
  // Telegram keeps no friend list: the check says it cannot tell, never "not added".
  assert.deepEqual((({ status, reason }) => ({ status, reason }))((await call(chat, "GET", "/recipient")).body), { status: "unknown", reason: "not_checked" });
  const menu = await tg.waitFor("setMyCommands", (b) => !b.language_code, "the default command menu");
  const names = (menu.body.commands as { command: string }[]).map((c) => c.command);
  for (const name of ["anon", "anon_sessions", "anon_send", "anon_stop", "anon_approve", "anon_deny"]) assert.ok(names.includes(name), `${name} in ${names}`);
  const zh = await tg.waitFor("setMyCommands", (b) => b.language_code === "zh", "the Chinese command menu");
  assert.equal(zh.body.commands.find((c: { command: string }) => c.command === "anon_sessions")?.description, "列出在线的 Pi 会话");

  const { pi, build, run } = await asking(t, chat, { grantableRules: ["rm-rf"] });
  const request = await tg.waitFor("sendMessage", (b) => /【Pi 审批 [A-Z]{5}】/.test(b.text), "the approval request");
  const code = /审批 ([A-Z]{5})/.exec(request.body.text)![1]!;
  const buttons = (request.body.reply_markup.inline_keyboard as { text: string; callback_data: string }[][]).flat();
  assert.deepEqual(
    buttons.map((b) => b.text),
    ["批准", "拒绝", "批准并授权 30 分钟"],
  );
  assert.match(buttons[2]!.callback_data, new RegExp(`^an:g30:${code}:`));

  await tg.privateMessage(TELEGRAM_OWNER, "/anon_sessions");
  const listing = await tg.waitFor("sendMessage", (b) => b.text.includes("#1"), "the session listing");
  assert.ok(listing.body.text.includes(pi.cwd.split("/").pop()!), listing.body.text);
  assert.equal(String(listing.body.chat_id), String(TELEGRAM_OWNER.id));

  const requestId = [...tg.messages.values()].find((m) => m.text === request.body.text)!.message_id;
  await tg.press(TELEGRAM_OWNER, requestId, buttons[1]!.callback_data);
  await tg.waitFor("sendMessage", (b) => b.text === `已拒绝 ${code}（rm -rf），决定已发给 Pi。`, "the owner's denial confirmed");
  await run;
  assert.equal(existsSync(build), true, "denied: nothing ran");
  const [result] = toolResults(pi, "bash");
  assert.equal(result!.isError, true);
  assert.match(result!.text, /在聊天中拒绝了「rm -rf」/);
});

test("Discord: components on the request; a stranger's press does nothing; the owner's Approve runs the command, the request is edited without components, a late press hears it is decided; /anon approvals still works", {
  timeout: 120_000,
}, async (t) => {
  const chat = await startDiscordChat();
  const dc = chat.fake;
  const registered = await dc.waitFor("PUT", new RegExp(`^/applications/${dc.applicationId}/commands$`), "the slash commands");
  const anon = (registered.body as { name: string; options: { name: string }[] }[]).find((c) => c.name === "anon");
  assert.ok(anon?.options.some((o) => o.name === "approve"));

  const { pi, build, run, sessionId } = await asking(t, chat);
  const dm = dc.dmChannel(DISCORD_OWNER.id);
  const request = await dc.waitFor("POST", new RegExp(`^/channels/${dm}/messages$`), "the approval request");
  assert.match(request.body.content, /【Pi 审批 [A-Z]{5}】/);
  const code = /审批 ([A-Z]{5})/.exec(request.body.content)![1]!;
  const [row] = request.body.components as { type: number; components: { type: number; custom_id: string; label: string }[] }[];
  assert.equal(row!.type, 1);
  assert.deepEqual(
    row!.components.map((b) => [b.type, b.label]),
    [
      [2, "批准"],
      [2, "拒绝"],
    ],
  );
  const [approve, deny] = row!.components.map((b) => b.custom_id);
  assert.match(approve!, BUTTON_ID);
  const requestId = [...dc.messages.values()].find((m) => m.content === request.body.content)!.id;

  const strangerToken = await dc.press(DISCORD_STRANGER, requestId, approve!);
  await waitUntil(
    async () => (await auditActions(chat)).some((e) => e.action === "chat.refused" && e.data.command === "button"),
    "the stranger's press on the trail",
  );
  assert.equal(await approvalState(chat, sessionId), "pending");
  assert.equal(dc.calls.filter((c) => c.path.includes(strangerToken) && c.path.startsWith("/webhooks/")).length, 0, "the stranger got no follow-up");

  const slashToken = await dc.slash(DISCORD_OWNER, "anon", "approvals");
  const open = await dc.waitFor("POST", new RegExp(`^/webhooks/${dc.applicationId}/${slashToken}$`), "the slash command's follow-up");
  assert.match(open.body.content, new RegExp(code));

  const ownerToken = await dc.press(DISCORD_OWNER, requestId, approve!);
  const callback = dc.calls.find((c) => c.path.startsWith("/interactions/") && c.path.includes(ownerToken));
  assert.deepEqual(callback?.body, { type: 6 }, "the press acknowledged as a deferred update");
  const confirmed = await dc.waitFor("POST", new RegExp(`^/webhooks/${dc.applicationId}/${ownerToken}$`), "the owner's confirmation");
  assert.equal(confirmed.body.content, `已批准 ${code}（rm -rf），决定已发给 Pi。`);
  const edit = await dc.waitFor("PATCH", new RegExp(`^/channels/${dm}/messages/${requestId}$`), "the request edited");
  assert.deepEqual(edit.body.components, []);
  assert.match(
    edit.body.content,
    new RegExp(`^【Pi 审批 ${code}】rm -rf：已在聊天中批准(，正在送达 Pi)?（chat:discord:${DISCORD_OWNER.id}）\\n┃ rm -rf build$`),
  );
  assert.deepEqual(dc.messages.get(requestId)!.components, []);
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  assert.deepEqual(
    toolResults(pi, "bash").map((r) => r.isError),
    [false],
  );

  const lateToken = await dc.press(DISCORD_OWNER, requestId, deny!);
  const late = await dc.waitFor("POST", new RegExp(`^/webhooks/${dc.applicationId}/${lateToken}$`), "the late press answered");
  assert.match(late.body.content, new RegExp(`^审批 ${code} 已经有了结果：已在聊天中批准`));
});

test("Discord: the owner's Deny press refuses the call", { timeout: 120_000 }, async (t) => {
  const chat = await startDiscordChat();
  const dc = chat.fake;
  const { pi, build, run } = await asking(t, chat);
  const dm = dc.dmChannel(DISCORD_OWNER.id);
  const request = await dc.waitFor("POST", new RegExp(`^/channels/${dm}/messages$`), "the approval request");
  const code = /审批 ([A-Z]{5})/.exec(request.body.content)![1]!;
  const requestId = [...dc.messages.values()].find((m) => m.content === request.body.content)!.id;
  const deny = request.body.components[0].components[1].custom_id as string;
  const token = await dc.press(DISCORD_OWNER, requestId, deny);
  const confirmed = await dc.waitFor("POST", new RegExp(`^/webhooks/${dc.applicationId}/${token}$`), "the owner's denial confirmed");
  assert.equal(confirmed.body.content, `已拒绝 ${code}（rm -rf），决定已发给 Pi。`);
  await run;
  assert.equal(existsSync(build), true, "denied: nothing ran");
  assert.equal(toolResults(pi, "bash")[0]!.isError, true);
});

test("quote-reply answers on both: 同意 quoting the Telegram request approves, 拒绝 quoting the Discord request denies", { timeout: 120_000 }, async (t) => {
  const telegram = await startTelegramChat();
  const first = await asking(t, telegram);
  const tg = telegram.fake;
  const request = await tg.waitFor("sendMessage", (b) => /【Pi 审批 [A-Z]{5}】/.test(b.text), "the Telegram request");
  const code = /审批 ([A-Z]{5})/.exec(request.body.text)![1]!;
  const requestId = [...tg.messages.values()].find((m) => m.text === request.body.text)!.message_id;
  await tg.privateMessage(TELEGRAM_OWNER, "同意", { replyTo: requestId });
  await tg.waitFor("sendMessage", (b) => b.text === `已批准 ${code}（rm -rf），决定已发给 Pi。`, "the quote-reply approved");
  await first.run;
  assert.equal(existsSync(first.build), false, "approved: the command ran");

  const discord = await startDiscordChat();
  const second = await asking(t, discord);
  const dc = discord.fake;
  const dm = dc.dmChannel(DISCORD_OWNER.id);
  const dRequest = await dc.waitFor("POST", new RegExp(`^/channels/${dm}/messages$`), "the Discord request");
  const dCode = /审批 ([A-Z]{5})/.exec(dRequest.body.content)![1]!;
  const dRequestId = [...dc.messages.values()].find((m) => m.content === dRequest.body.content)!.id;
  await dc.directMessage(DISCORD_OWNER, "拒绝 不要删", { replyTo: dRequestId });
  const denied = await waitUntil(
    () => dc.calls.find((c) => c.method === "POST" && c.path === `/channels/${dm}/messages` && String(c.body?.content).startsWith(`已拒绝 ${dCode}`)),
    "the Discord quote-reply denied",
    30_000,
  );
  assert.equal(denied.body.content, `已拒绝 ${dCode}（rm -rf），理由：不要删，决定已发给 Pi。`);
  await second.run;
  assert.equal(existsSync(second.build), true, "denied: nothing ran");
});

test("Telegram: the Approve-for-30-minutes press approves and grants, the same as anon.approve CODE 30m", { timeout: 120_000 }, async (t) => {
  const chat = await startTelegramChat();
  const tg = chat.fake;
  const { build, run } = await asking(t, chat, { grantableRules: ["rm-rf"] });
  const request = await tg.waitFor("sendMessage", (b) => /【Pi 审批 [A-Z]{5}】/.test(b.text), "the approval request");
  const code = /审批 ([A-Z]{5})/.exec(request.body.text)![1]!;
  const grant = (request.body.reply_markup.inline_keyboard as { callback_data: string }[][]).flat()[2]!.callback_data;
  const requestId = [...tg.messages.values()].find((m) => m.text === request.body.text)!.message_id;
  await tg.press(TELEGRAM_OWNER, requestId, grant);
  const granted = await tg.waitFor("sendMessage", (b) => b.text.startsWith(`已批准 ${code}`), "the grant confirmed");
  assert.match(granted.body.text, /并授权本会话 30 ?分钟内只命中规则 rm-rf 的请求直接批准（授权 G[A-Z]{4}）/);
  await run;
  assert.equal(existsSync(build), false, "approved: the command ran");
  const { body } = await call(chat, "GET", "/operator/grants", undefined, OPERATOR_TOKEN);
  assert.equal(body.grants.length, 1, JSON.stringify(body));
});
