/**
 * Approvals on a server without a chat (the log persona, no bot), in each language: a REAL Pi
 * session against the REAL plugin. The dialog never offers the chat the terminal note says is not
 * there, and the request's way to the owner is said once, as it is.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { messagesFor } from "../../extension/texts/messages.ts";
import { captureLog, startKoishi } from "../../harness/koishi.ts";
import { ai, answerableTerminal } from "../../harness/pi.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { waitUntil } from "../../harness/wait.ts";
import { rmBuild } from "./approvals-stage.ts";

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) with no chat on the server the dialog does not offer the chat, and the terminal says no request was sent`, {
    timeout: 90_000,
  }, async (t) => {
    const m = messagesFor(language);
    const term = answerableTerminal();
    const log = captureLog();
    t.after(() => log.stop());
    const koishi = await startKoishi({ locales: [language], config: { logPersona: true } });
    const pi = await piOnServer(t, koishi, { ui: term.ui, userConfig: { language, approval: { enabled: true } } });
    await pi.prompt("/anon-notify");
    assert.ok(
      pi.notices().some((n) => n.includes(m.toggle.noChat)),
      pi.notices().join("\n"),
    );
    pi.script([rmBuild(), ai.fauxAssistantMessage("ok")]);
    const run = pi.prompt("clean the build folder");
    const dialog = await waitUntil(() => term.dialogs[0], "the terminal dialog opened");
    assert.doesNotMatch(dialog.message, language === "en-US" ? /answer in the chat/ : /在聊天中回答/, dialog.message);
    const template = m.approvals.requestReach
      .none("QQQQQ")
      .replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
      .replace("QQQQQ", "[A-Z0-9]{5}");
    const said = await waitUntil(
      () => {
        const found = pi.notices().filter((n) => new RegExp(`^${template}$`).test(n));
        return found.length > 0 ? found : undefined;
      },
      () => `the note that no request was sent: ${pi.notices().join("\n")}`,
    );
    assert.equal(said.length, 1, pi.notices().join("\n"));
    dialog.answer(false);
    await run;
    // No chat: no request is owed, so the log never says one is waiting to be sent.
    assert.deepEqual(
      log.warnings().filter((w) => /not sent yet|尚未发出|还没发出/.test(w)),
      [],
    );
  });
}
