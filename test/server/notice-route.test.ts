/** Where notices end up: the pure decision, /health's `notices` and `chat`, and the start-up warning in the instance's language. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { HealthAnswer, type NoticesAnswer } from "../../protocol/status.ts";
import { captureLog, startKoishi, type KoishiOptions } from "../../harness/koishi.ts";
import { chatReachesOwner, noticeRoute, type NoticeFacts } from "../../server/status/notices.ts";
import { waitUntil } from "../../harness/wait.ts";
import { MockBot, withPersona } from "./persona-standin.ts";

describe("noticeRoute", () => {
  const rows: [string, NoticeFacts, NoticesAnswer, boolean][] = [
    ["a real persona", { persona: "real", directConfigured: true, bot: "online" }, { route: "persona", ready: true, reason: null }, true],
    ["a real persona, no bot", { persona: "real", directConfigured: false, bot: "missing" }, { route: "persona", ready: true, reason: null }, false],
    ["the log persona", { persona: "log", directConfigured: false, bot: "missing" }, { route: "log", ready: true, reason: null }, false],
    ["no persona, no target", { persona: null, directConfigured: false, bot: "missing" }, { route: "none", ready: false, reason: "no_persona" }, false],
    ["no persona, bot online", { persona: null, directConfigured: true, bot: "online" }, { route: "direct", ready: true, reason: "no_persona" }, true],
    ["no persona, bot offline", { persona: null, directConfigured: true, bot: "offline" }, { route: "direct", ready: false, reason: "bot_offline" }, true],
    [
      "no persona, bot not loaded",
      { persona: null, directConfigured: true, bot: "missing" },
      { route: "direct", ready: false, reason: "bot_not_found" },
      false,
    ],
  ];
  for (const [label, facts, answer, chat] of rows) {
    test(label, () => {
      assert.deepEqual(noticeRoute(facts), answer);
      assert.equal(chatReachesOwner(facts), chat);
    });
  }
});

async function healthOf(options: KoishiOptions, t: { after(fn: () => Promise<void>): void }) {
  const log = captureLog();
  const koishi = await startKoishi(options);
  t.after(async () => {
    log.stop();
    await koishi.stop();
  });
  const response = await fetch(`${koishi.baseUrl}/health`, { headers: { authorization: `Bearer ${koishi.token}` } });
  const health = HealthAnswer.parse(await response.json());
  // The check runs once start-up has settled: after this flush and a turn, it has spoken or never will.
  await koishi.app.lifecycle.flush();
  await new Promise((resolve) => setImmediate(resolve));
  return { health, warnings: log.warnings };
}

const warningWith = (warnings: () => string[], text: string) =>
  waitUntil(() => warnings().find((warning) => warning.includes(text)), `a warning naming ${text}: ${warnings().join("\n")}`);

describe("/health says where notices go", () => {
  test("the documented SQLite koishi.yml (no YesImBot, no logPersona): nowhere, said at start in Chinese", async (t) => {
    const { health, warnings } = await healthOf({}, t);
    assert.deepEqual(health.notices, { route: "none", ready: false, reason: "no_persona" });
    assert.equal(health.chat, false);
    const line = await warningWith(warnings, "no_persona");
    assert.match(line, /^通知没有去处：没有人格/);
  });
  test("the same in English when the instance's language is English", async (t) => {
    const { warnings } = await healthOf({ locales: ["en-US", "zh-CN"] }, t);
    const line = await warningWith(warnings, "no_persona");
    assert.match(line, /^Notices have nowhere to go: there is no persona/);
    assert.equal(line.match(/\p{Script=Han}/u), null, line);
  });
  test("a bot and recipient but no persona: only direct notices, said at start", async (t) => {
    const { health, warnings } = await healthOf(
      { config: { botId: "mock:514", recipientId: "10001" }, plugins: (use) => void use(MockBot, { selfId: "514" }) },
      t,
    );
    assert.equal(health.notices?.route, "direct");
    assert.equal(health.notices?.reason, "no_persona");
    assert.equal(health.chat, true);
    assert.match(await warningWith(warnings, "no_persona"), /^没有人格.*只有 delivery 为 "direct" 的通知能由机器人送达/);
  });
  for (const [locales, says] of [
    [["zh-CN"], /^机器人 onebot:20002（botId）没有加载：它的适配器插件没有安装或没有启动/],
    [["en-US", "zh-CN"], /^The bot onebot:20002 \(botId\) is not loaded: its adapter plugin is missing or not started, or botId is wrong/],
  ] as const) {
    test(`the log persona with a botId whose adapter is not installed: the missing bot is said at start (${locales[0]})`, async (t) => {
      const { health, warnings } = await healthOf({ locales: [...locales], config: { logPersona: true, botId: "onebot:20002", recipientId: "10001" } }, t);
      assert.equal(health.chat, false);
      assert.match(await warningWith(warnings, "onebot:20002"), says);
    });
  }
  test("the log persona: printed in the log, no warning", async (t) => {
    const { health, warnings } = await healthOf({ config: { logPersona: true } }, t);
    assert.deepEqual(health.notices, { route: "log", ready: true, reason: null });
    assert.equal(health.chat, false);
    assert.deepEqual(warnings(), []);
  });
  test("a persona: ready, no warning", async (t) => {
    const { health, warnings } = await healthOf({ config: { botId: "mock:514", recipientId: "10001" }, plugins: withPersona }, t);
    assert.deepEqual(health.notices, { route: "persona", ready: true, reason: null });
    assert.equal(health.chat, true);
    assert.deepEqual(warnings(), []);
  });
});
