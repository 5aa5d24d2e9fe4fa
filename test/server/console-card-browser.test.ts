/** The session card on a desktop window in a real Chromium, in each language: the session id stays on one line, and
 * while every session is muted the card offers ending that mute (not another mute) and the mute bar no longer
 * offers muting all next to ending all mutes. */
import { test } from "node:test";
import assert from "node:assert/strict";
import messages from "../../console/client/messages.ts";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage } from "../helpers/console.ts";

for (const locale of ["en-US", "zh-CN"] as const) {
  test(`(${locale}) a card's id is one line on desktop; under a mute of all sessions the card and the bar offer only ending it`, {
    skip: CHROMIUM_SKIP,
    timeout: 120_000,
  }, async (t) => {
    const browser = await consoleBrowser(t);
    const stage = await consoleStage(t);
    const { sessionId } = await stage.openPi();
    const page = await browser.newPage({ locale, viewport: { width: 1280, height: 800 } });
    await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
    const card = page.locator(`[data-test=session][data-session-id="${sessionId}"]`);
    await card.waitFor({ timeout: 20_000 });

    // Line boxes of the id's text: one, however the browser could break it.
    const lines = await page.evaluate(`(() => {
      const range = document.createRange();
      range.selectNodeContents(document.querySelector('[data-session-id="${sessionId}"] .id'));
      return new Set([...range.getClientRects()].map((rect) => Math.round(rect.top))).size;
    })()`);
    assert.equal(lines, 1, "the session id on one line");
    assert.equal(await card.locator(".id").innerText(), sessionId, "whole");

    const words = messages[locale];
    await page.locator("[data-test=mute-all]").click();
    await page.locator("[data-test=mute-all-state]").waitFor({ timeout: 15_000 });
    assert.equal(await page.locator("[data-test=mute-all]").count(), 0, "no 'mute all' while all are muted");
    assert.equal(await page.locator("[data-test=mute-bar] [data-test=unmute-all]").innerText(), words.unmuteAll);
    assert.equal(await card.locator("[data-test=mute]").count(), 0, "no 'mute' on a muted card");
    await card.locator("[data-test=unmute-all]", { hasText: words.unmuteAll }).click();
    await card.locator("[data-test=mute]", { hasText: words.mute }).waitFor({ timeout: 15_000 });
    assert.equal(await page.locator("[data-test=mute-all]").innerText(), words.muteAll);
  });
}
