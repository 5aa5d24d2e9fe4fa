/**
 * The console page words the extension's own notice lines in its language, whatever language Pi
 * speaks: a REAL Pi session in one language runs a report_progress call and a completed run, then
 * a failed run; the page, in a real headless Chromium set to the other language, shows the session
 * view (the latest progress, the reply, the failure) and the timeline lines with no word of Pi's
 * language, only the agent's words, the user's tasks and names. Skipped, saying so, when no
 * Chromium is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { basename } from "node:path";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage } from "../helpers/console.ts";
import { otherLanguage } from "../helpers/languages.ts";
import { ai } from "../../harness/pi.ts";

const REPLY = "All 12 tests pass";
const REPORT = { stage: "progress", severity: "warn", summary: "Half of the suite ran" };

for (const [piLanguage, pageLanguage] of [
  ["zh-CN", "en-US"],
  ["en-US", "zh-CN"],
] as const) {
  test(`a Pi in ${piLanguage}, the page in ${pageLanguage}: a report, a completed run and a failed run read in ${pageLanguage} alone, the agent's words as they came`, {
    skip: CHROMIUM_SKIP,
    timeout: 180_000,
  }, async (t) => {
    const browser = await consoleBrowser(t);
    const stage = await consoleStage(t, { userConfig: { language: piLanguage, progressTool: { enabled: true } } });
    const { pi, sessionId } = await stage.openPi();
    const page = await browser.newPage({ locale: pageLanguage });
    await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
    const view = page.locator(`[data-test=session-view][data-session-id="${sessionId}"]`);
    await view.waitFor({ timeout: 20_000 });
    const project = basename(pi.cwd);
    const verbatim = [project, REPLY, REPORT.summary, "run the tests", "deploy", "boom"];
    const only = (text: string) =>
      assert.deepEqual(otherLanguage(text, pageLanguage, verbatim), [], `only ${pageLanguage} but the agent's words and names:\n${text}`);

    pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("report_progress", REPORT)], { stopReason: "toolUse" }), ai.fauxAssistantMessage(REPLY)]);
    await pi.prompt("run the tests");
    const done = view.locator("[data-test=run][data-outcome=done]");
    await done.waitFor({ timeout: 20_000 });
    assert.equal(await done.locator("[data-test=run-reply]").innerText(), REPLY, "the reply alone, the outcome worded by the page");
    const latest = await done.locator("[data-test=run-latest]").innerText();
    assert.ok(latest.includes(pageLanguage === "en-US" ? "[Attention] Progress: Half of the suite ran" : "【注意】进展：Half of the suite ran"), latest);
    only(latest);

    pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "boom" })]);
    await pi.prompt("deploy");
    const failed = view.locator("[data-test=run][data-outcome=failed]");
    await failed.waitFor({ timeout: 20_000 });
    assert.equal(await failed.locator("[data-test=run-reply]").innerText(), "boom", "Pi's error text alone, the failure worded by the page");

    const progressLine = page.locator("[data-test=timeline-item]", { hasText: REPORT.summary }).first();
    const finishedLine = page.locator("[data-test=timeline-item]", { hasText: "run the tests" }).first();
    const failedLine = page.locator("[data-test=timeline-item]", { hasText: "deploy" }).first();
    for (const line of [progressLine, finishedLine, failedLine]) {
      await line.waitFor({ timeout: 20_000 });
      only(await line.innerText());
    }
    assert.ok((await finishedLine.innerText()).includes(pageLanguage === "en-US" ? `Project ${project}: ${REPLY}` : `项目 ${project}：${REPLY}`));
  });
}
