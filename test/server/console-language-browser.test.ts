/**
 * The console page words an approval in its own language, whatever language Pi speaks: a REAL Pi
 * session set to one language asks for each rule that has no command words of its own, and the
 * page, in a real headless Chromium set to the other, shows the approval card, the page-wide
 * waiting line and the timeline's request line with no word of Pi's language but the command and
 * names; each is denied from the card. Then a run fails: why (a code on the wire) reads in the
 * page's language in the session view and the timeline. Skipped, saying so, when no Chromium is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { basename } from "node:path";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage } from "../helpers/console.ts";
import { otherLanguage, RULE_ONLY_CASES } from "../helpers/languages.ts";
import { ai, answerableTerminal } from "../../harness/pi.ts";

for (const [piLanguage, pageLanguage] of [
  ["zh-CN", "en-US"],
  ["en-US", "zh-CN"],
] as const) {
  test(`a Pi in ${piLanguage}, the page in ${pageLanguage}: each rule-only approval and a failed run read in ${pageLanguage} alone, the command verbatim`, {
    skip: CHROMIUM_SKIP,
    timeout: 180_000,
  }, async (t) => {
    const browser = await consoleBrowser(t);
    const stage = await consoleStage(t, { userConfig: { language: piLanguage, approval: { enabled: true } } });
    // The terminal's dialogs stay open, so the page answers.
    const { pi, sessionId } = await stage.openPi([], { ui: answerableTerminal().ui });
    const page = await browser.newPage({ locale: pageLanguage });
    await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
    const view = page.locator(`[data-test=session-view][data-session-id="${sessionId}"]`);
    await view.waitFor({ timeout: 20_000 });
    const project = basename(pi.cwd);
    for (const [i, sample] of RULE_ONLY_CASES.entries()) {
      pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: sample.command })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("ok")]);
      const run = pi.prompt(`case ${i}`);
      const card = view.locator("[data-test=approval][data-state=pending]");
      await card.waitFor({ timeout: 20_000 });
      const code = await card.locator(".code").innerText();
      assert.equal(await card.locator("[data-test=approval-preview]").innerText(), sample.command, "the command verbatim");
      const waiting = await page.locator("[data-test=waiting-item]").innerText();
      const asked = page.locator("[data-test=timeline-say]", { hasText: code }).first();
      await asked.waitFor({ timeout: 20_000 });
      for (const text of [await card.innerText(), waiting, await asked.innerText()]) {
        assert.ok(text.includes(sample[pageLanguage]), `the action in the page's words:\n${text}`);
        assert.deepEqual(otherLanguage(text, pageLanguage, [sample.command, code, project]), [], `only ${pageLanguage} but the command and names:\n${text}`);
      }
      await card.locator("[data-test=deny]").click();
      await run;
      await card.waitFor({ state: "detached", timeout: 20_000 });
    }

    // A failed run: the notice says why as a code, which the page words (its view and its timeline line).
    pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "boom" })]);
    await pi.prompt("fail once");
    const outcome = view.locator("[data-test=run][data-outcome=failed] [data-test=run-outcome]");
    await outcome.waitFor({ timeout: 20_000 });
    assert.equal(await outcome.innerText(), pageLanguage === "en-US" ? "failed: the model request failed" : "失败：模型请求出错");
    const failedLine = page.locator("[data-test=timeline-say]", { hasText: "fail once" }).first();
    await failedLine.waitFor({ timeout: 20_000 });
    const line = await failedLine.innerText();
    assert.deepEqual(otherLanguage(line, pageLanguage, ["fail once", project]), [], `only ${pageLanguage} but the task and names:\n${line}`);
  });
}
