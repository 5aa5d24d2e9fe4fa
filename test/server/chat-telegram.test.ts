/** Direct notices through the REAL Telegram adapter against the loopback Bot API: what the fake records is what Telegram would get. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { call } from "../../harness/agent-api.ts";
import { validEvent } from "../../harness/event-client.ts";
import { consolePlugin } from "../helpers/console.ts";
import { startTelegramChat, TELEGRAM_OWNER } from "../helpers/adapter-chat.ts";

test("a needs-you notice carries an Open console link where the console has a public address; other notices carry no buttons", {
  timeout: 60_000,
}, async (t) => {
  const chat = await startTelegramChat({ plugins: (use) => void use(consolePlugin, { open: false, selfUrl: "https://anon.example.org/" }) });
  t.after(() => chat.stop());
  const tg = chat.fake;
  const needsYou = validEvent({ delivery: "direct", status: "warning", summary: "需要你：Pi 正在等你回答", details: { needs_you: true } });
  assert.equal((await call(chat, "POST", "/events", needsYou)).status, 202);
  const sent = await tg.waitFor("sendMessage", (b) => b.text.includes(String(needsYou.event_id)), "the needs-you notice");
  assert.equal(String(sent.body.chat_id), String(TELEGRAM_OWNER.id));
  assert.deepEqual(sent.body.reply_markup, { inline_keyboard: [[{ text: "打开控制台", url: "https://anon.example.org/anon-notify" }]] });

  const plain = validEvent({ delivery: "direct" });
  assert.equal((await call(chat, "POST", "/events", plain)).status, 202);
  const other = await tg.waitFor("sendMessage", (b) => b.text.includes(String(plain.event_id)), "the plain notice");
  assert.deepEqual(other.body.reply_markup, { inline_keyboard: [] });
});

test("without a public console address a needs-you notice has no link button", { timeout: 60_000 }, async (t) => {
  const chat = await startTelegramChat();
  t.after(() => chat.stop());
  const needsYou = validEvent({ delivery: "direct", status: "warning", details: { needs_you: true } });
  assert.equal((await call(chat, "POST", "/events", needsYou)).status, 202);
  const sent = await chat.fake.waitFor("sendMessage", (b) => b.text.includes(String(needsYou.event_id)), "the needs-you notice");
  assert.deepEqual(sent.body.reply_markup, { inline_keyboard: [] });
});
