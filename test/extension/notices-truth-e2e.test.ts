/** A REAL Pi session against notify-webhook with no persona and no bot: `/anon-notify` warns first, the footer keeps
 * "(no chat on the server)" after /reload, the first failed receipt is told once, the doctor shows it, per language. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { messagesFor, type Language } from "../../extension/texts/messages.ts";
import { STATUS_KEY } from "../../protocol/state-bus.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { TEST_QQ, configureExtension } from "../../harness/webhook.ts";

const FIRST_FAILED: Record<Language, RegExp> = { "en-US": /^Notice (\S+) reached the server/, "zh-CN": /^通知 (\S+) 已被服务端接收/ };

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) with no persona and no bot, /anon-notify warns first, the first failed receipt is told once, the doctor shows it failed`, {
    timeout: 120_000,
  }, async (t) => {
    const m = messagesFor(language);
    const koishi = await startKoishi();
    const root = makeRoot();
    const savedEnv = { ...process.env };
    configureExtension(root, `${koishi.baseUrl}/events`, { language }, koishi.token);
    const pi = await startPi({ root });
    t.after(async () => {
      await pi.dispose();
      await koishi.stop();
      process.env = savedEnv;
      rmSync(root, { recursive: true, force: true });
    });

    await pi.prompt("/anon-notify");
    const warning = m.toggle.route.none(m.link.reason("no_persona"));
    const notices = pi.notices();
    const warned = notices.findIndex((n) => n.startsWith(warning));
    // No bot at all: the server says it has no chat, so no private chat is warned about.
    const enabled = notices.indexOf(m.toggle.enabled(TEST_QQ, "no_chat"));
    assert.ok(warned >= 0, `warned:\n${notices.join("\n")}`);
    assert.ok(enabled > warned, `the warning comes before the switch-on:\n${notices.join("\n")}`);
    // A /reload restores the session switched on, and its footer still says there is no chat.
    const footers = () => pi.ui.filter((call) => call.method === "setStatus" && call.args[0] === STATUS_KEY).map((call) => String(call.args[1]));
    const noChat = m.footer.active + m.footer.target(TEST_QQ) + m.footer.note(m.notes.no_chat);
    assert.equal(footers().at(-1), noChat);
    const before = footers().length;
    await pi.session.reload();
    await waitUntil(
      () => (footers().length > before && footers().at(-1) === noChat ? true : undefined),
      () => `the footer after /reload: ${footers().slice(before).join(" | ")}`,
      15_000,
    );

    pi.script([ai.fauxAssistantMessage("first"), ai.fauxAssistantMessage("second")]);
    await pi.prompt("task one");
    const told = await waitUntil(
      () => pi.notices().find((n) => FIRST_FAILED[language].test(n)),
      () => `the failed receipt is told:\n${pi.notices().join("\n")}`,
      30_000,
    );
    const eventId = FIRST_FAILED[language].exec(told)![1]!;
    assert.equal(told, m.link.firstFailedReceipt(eventId, m.link.reason("no_persona")));

    await pi.prompt("task two");
    await pi.prompt("/anon-notify-doctor");
    const doctor = await waitUntil(() => pi.notices().find((n) => n.startsWith(m.doctor.title)), "the doctor answered", 30_000);
    assert.ok(doctor.includes(m.doctor.noticeRoute(m.doctor.routes.none, m.link.reason("no_persona"))), doctor);
    assert.ok(doctor.includes(m.doctor.receiptNow("failed", m.link.reason("no_persona"))), doctor);
    // The second failure is not told again: once per session.
    await new Promise((resolve) => setTimeout(resolve, 2_000));
    assert.equal(pi.notices().filter((n) => FIRST_FAILED[language].test(n)).length, 1, pi.notices().join("\n"));
    if (language === "en-US") {
      const read = [...pi.notices(), ...pi.ui.filter((call) => call.method === "setStatus").map((call) => String(call.args[1]))];
      assert.deepEqual(
        read.filter((text) => /\p{Script=Han}/u.test(text)),
        [],
        "nothing the person reads is in Chinese",
      );
    }
  });
}
