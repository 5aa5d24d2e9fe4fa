/**
 * A receipt's error where a person reads it (the server's log, `npm start`'s terminal): the reason in
 * the instance's language first, the code in brackets; the wire keeps `code: reason` for clients.
 * The plugin's other log lines on a normal start speak that language too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { deliveryError, errorInWords } from "../../server/handover/decisions.ts";
import { captureLog, startKoishi } from "../../harness/koishi.ts";
import { settledReceipt, postEvent, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";
import { withPersona } from "./persona-standin.ts";
import { sayIn } from "./say.ts";

test("a receipt's error reads reason first, code in brackets, in each language", () => {
  const rows: [string, string, string][] = [
    [
      "no_persona",
      "没有可用的人格（没有检测到 YesImBot v3，也没有开启 logPersona），事件没有交出去（no_persona）",
      "No persona is available (YesImBot v3 not found, logPersona off), so the event was not handed over (no_persona)",
    ],
    [
      "direct_not_configured",
      "没有配置 botId 或 recipientId，无法直接发送（direct_not_configured）",
      "No botId or recipientId is configured, so nothing can be sent directly (direct_not_configured)",
    ],
    ["send_failed", "机器人发送失败：platform down（send_failed）", "The bot could not send it: platform down (send_failed)"],
  ];
  for (const [code, zh, en] of rows) {
    const params = code === "send_failed" ? ["platform down"] : [];
    assert.equal(errorInWords(sayIn("zh-CN"), deliveryError(sayIn("zh-CN"), code as never, ...params)), zh);
    assert.equal(errorInWords(sayIn("en-US"), deliveryError(sayIn("en-US"), code as never, ...params)), en);
  }
  assert.equal(errorInWords(sayIn("en-US"), "HTTP 500"), "HTTP 500", "an error without a code is shown as it is");
});

test("a notice that cannot be delivered is logged in the instance's language with its code in brackets", { timeout: 60_000 }, async (t) => {
  const rows: [string[], string][] = [
    [["en-US", "zh-CN"], "was not delivered: No persona is available (YesImBot v3 not found, logPersona off), so the event was not handed over (no_persona)"],
    [["zh-CN", "en-US"], "没有送达：没有可用的人格（没有检测到 YesImBot v3，也没有开启 logPersona），事件没有交出去（no_persona）"],
  ];
  for (const [locales, expected] of rows) {
    const log = captureLog();
    t.after(log.stop);
    const koishi = await startKoishi({ locales });
    t.after(koishi.stop);
    const event = validEvent();
    assert.equal((await postEvent(koishi, event)).status, 202);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.match(String(receipt.error), /^no_persona: /, "the wire keeps the code first");
    const line = await waitUntil(() => log.warnings().find((warning) => warning.includes(String(event.event_id))), "the log line");
    assert.ok(line?.endsWith(expected), `${locales[0]}: ${line}`);
    log.stop();
    await koishi.stop();
  }
});

test("the plugin's info lines on a normal start speak the instance's language", { timeout: 60_000 }, async (t) => {
  const rows: [string[], string][] = [
    [["en-US"], "YesImBot v3 detected: events go to its main conversation"],
    [["zh-CN"], "检测到 YesImBot v3：事件交给它的主对话"],
  ];
  for (const [locales, expected] of rows) {
    const log = captureLog();
    t.after(log.stop);
    const koishi = await startKoishi({ locales, plugins: withPersona });
    t.after(koishi.stop);
    await waitUntil(
      () => (log.infos().includes(expected) ? true : undefined),
      () => `${locales[0]}: ${log.infos().join("\n")}`,
    );
    log.stop();
    await koishi.stop();
  }
});
