/** Koishi's frame around the page under `npm start`, in a real Chromium whose own language is the other one: the
 * server's language decides the tab title, `<html lang>` and every sidebar tooltip; the only console address
 * printed is the one that signs in, and the bare address lands on the page. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import messages from "../../console/client/messages.ts";
import { freePort } from "../../harness/koishi.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { CHROMIUM_SKIP, consoleBrowser } from "../helpers/console.ts";

const FRAME = {
  "en-US": { title: "Pi sessions | Koishi console", browser: "zh-CN", ready: messages["en-US"].noSessions },
  "zh-CN": { title: "Pi 会话 | Koishi 控制台", browser: "en-US", ready: messages["zh-CN"].noSessions },
} as const;

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) npm start's Koishi frame speaks the server's language and its one printed link signs in`, {
    skip: CHROMIUM_SKIP,
    timeout: 120_000,
  }, async (t) => {
    const browser = await consoleBrowser(t);
    const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-frame-"));
    const server = await spawnStandalone(dataDir, await freePort(), { language });
    t.after(async () => {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    // Koishi's server logs where it listens; any other address outside the API is a page's.
    const lines = server
      .output()
      .split("\n")
      .filter((line) => !line.includes("server listening at"));
    const pages = lines.flatMap((line) => line.match(/http:\/\/\S+/g) ?? []).filter((link) => !link.includes("/api/"));
    assert.equal(pages.length, 1, `one console address printed, not Koishi's own:\n${server.output()}`);
    const link = new URL(pages[0]!);
    assert.ok(link.searchParams.get("token"), "the printed address signs in");

    const page = await browser.newPage({ locale: FRAME[language].browser, viewport: { width: 1280, height: 800 } });
    await page.goto(link.href);
    await page.getByText(FRAME[language].ready, { exact: false }).waitFor({ timeout: 30_000 });
    assert.equal(await page.title(), FRAME[language].title);
    assert.equal(await page.locator("html").getAttribute("lang"), language);
    const tooltips: string[] = [];
    for (const item of await page.locator(".layout-activity .activity-item").all()) {
      await item.hover();
      tooltips.push(await page.locator(".activity-item-tooltip:visible").last().innerText());
    }
    assert.deepEqual(tooltips, [messages[language].pageTitle], "the sidebar holds the page alone");
    if (language === "en-US") assert.doesNotMatch(await page.locator("body").innerText(), /\p{Script=Han}/u, "no Chinese on the page");

    // The bare address lands on the page, signed in from this tab's storage.
    await page.goto(link.origin);
    await page.getByText(FRAME[language].ready, { exact: false }).waitFor({ timeout: 30_000 });
    assert.equal(new URL(page.url()).pathname, "/anon-notify");
  });
}
