/**
 * Signing out of the console page in a real headless Chromium against `npm start`, in both languages:
 * the page's data goes, the tab's stored token is cleared, a reload stays signed out. Skipped without Chromium.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Language } from "../../common/locale.ts";
import { CHROMIUM_SKIP, consoleBrowser, standaloneConsole } from "../helpers/console.ts";

const WORDS = {
  "zh-CN": {
    button: "退出登录",
    signedOut: "已退出登录：这个标签页保存的 Token 已清除。要再登录，请粘贴 Token，或重新打开 npm start 打印的链接。",
    needed: /需要控制台 Token/,
  },
  "en-US": {
    button: "Sign out",
    signedOut: "Signed out: the token this tab kept is cleared. To sign in again, paste the token or open the link npm start printed again.",
    needed: /needs the console token/,
  },
} as const;

test("signing out of the page clears this tab's token and takes the data away; a reload stays signed out; in both languages", {
  skip: CHROMIUM_SKIP,
  timeout: 180_000,
}, async (t) => {
  const browser = await consoleBrowser(t);
  for (const [language, words] of Object.entries(WORDS)) {
    const stage = await standaloneConsole(t, language as Language);
    const page = await browser.newPage({ locale: language });
    const pageErrors: string[] = [];
    page.on("pageerror", (error) => pageErrors.push(error.message));
    const signOutCalls: string[] = [];
    page.on("websocket", (socket) => socket.on("framesent", (frame) => String(frame.payload).includes("anon-notify/sign-out") && signOutCalls.push("sent")));
    await page.goto(stage.link.href);
    await page.locator("[data-test=gate]").waitFor({ timeout: 30_000 });
    const stored = () => page.evaluate(() => sessionStorage.getItem("anon-notify.console-token"));
    assert.ok(await stored(), `${language}: the token kept after signing in`);

    const button = page.locator("[data-test=sign-out]");
    assert.equal(await button.innerText(), words.button);
    await button.click();
    const form = page.locator("[data-test=sign-in][data-state=signed_out]");
    await form.waitFor({ timeout: 20_000 });
    assert.equal(await page.locator("[data-test=sign-in-why]").innerText(), words.signedOut);
    assert.equal(await page.locator("[data-test=gate], [data-test=session], [data-test=timeline-item]").count(), 0, `${language}: no data after signing out`);
    assert.equal(await stored(), null, `${language}: the token is gone from this tab`);
    assert.ok(await page.locator("[data-test=token]").isVisible(), "a box for the token");
    assert.equal(signOutCalls.length, 1, "the server was told once");

    // Opened again (the bare address, as a reload after the link leaves it): still signed out.
    await page.reload();
    await page.locator("[data-test=sign-in][data-state=needed]").waitFor({ timeout: 30_000 });
    assert.match(await page.locator("[data-test=sign-in-why]").innerText(), words.needed);
    assert.equal(await page.locator("[data-test=gate]").count(), 0);

    // The token typed in signs in again.
    await page.locator("[data-test=token]").fill(stage.link.searchParams.get("token")!);
    await page.locator("[data-test=sign-in-submit]").click();
    await page.locator("[data-test=gate]").waitFor({ timeout: 20_000 });
    assert.deepEqual(
      pageErrors.filter((message) => message !== "Illegal invocation"),
      [],
      "no errors in the page",
    );
    await page.close();
  }
});
