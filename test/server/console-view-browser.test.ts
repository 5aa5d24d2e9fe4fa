/**
 * The owner's view of what a session did, in a real headless Chromium against a real Pi session:
 * a run that finished with a markdown reply (after a tool-error and progress notices), a failed one and one stopped
 * from the page, with their outcomes and durations; the reply rendered without HTML or images; an
 * approval the session waits on, answered in its view; the
 * page in Chinese and in English, at a phone's and a laptop's size. The screenshots go to a temp
 * folder, or into docs/images/ for the README with UPDATE_SCREENSHOTS=1, so a test run leaves the
 * tree as it was. Skipped, saying so, when no Chromium is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Browser, Page } from "playwright-core";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage, type ConsoleStage } from "../helpers/console.ts";
import { ai, answerableTerminal, echoTool, latch, waitForAbortStep } from "../../harness/pi.ts";
import { rmBuild } from "../extension/approvals-stage.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { EventBody } from "../../protocol/events.ts";
import { readSaid } from "../../protocol/said.ts";

const IMAGES = process.env.UPDATE_SCREENSHOTS === "1" ? resolve(import.meta.dirname, "../../docs/images") : mkdtempSync(join(tmpdir(), "anon-notify-shots-"));
const SIZES = { phone: { width: 390, height: 844 }, desktop: { width: 1280, height: 800 } } as const;
const REPLY = '**README** 已更新：\n\n- 安装步骤\n- `npm start`\n\n<img src="https://evil.example/x.png" onerror="alert(1)"> <script>alert(1)</script>';

/** Start, progress (after every tool call) and final notices on, and no spacing between notices, so every run has a known start. */
const USER_CONFIG = {
  notify: { started: true, progress: true, completed: true, failed: true, toolError: true },
  progress: { firstAfterMs: 3_600_000, intervalMs: 3_600_000, toolCountThreshold: 1, errorCooldownMs: 0 },
  approval: { enabled: true },
  delivery: { timeoutMs: 12_000, maxAttempts: 3, backoffMs: 1_000, minIntervalMs: 0, outboxMaxAgeMs: 7 * 24 * 3_600_000 },
};

async function openSignedIn(
  browser: Browser,
  stage: ConsoleStage,
  locale: "zh-CN" | "en-US",
  size: keyof typeof SIZES,
): Promise<{ page: Page; errors: string[] }> {
  const page = await browser.newPage({ viewport: SIZES[size], locale });
  const errors: string[] = [];
  page.on("pageerror", (error) => errors.push(error.message));
  await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
  await page.locator("[data-test=gate]").waitFor({ timeout: 20_000 });
  return { page, errors };
}

test("a real session's runs in the session view: done with the reply rendered safely, failed and why, stopped from the page by you, and its open approval answered there; both languages, phone and desktop", {
  skip: CHROMIUM_SKIP,
  timeout: 180_000,
}, async (t) => {
  const browser = await consoleBrowser(t);
  const stage = await consoleStage(t, { config: { logPersona: true }, userConfig: USER_CONFIG });
  // A terminal whose approval dialogs wait (unanswered), so the page answers.
  const { pi, sessionId } = await stage.openPi([echoTool()], { ui: answerableTerminal().ui });
  const { page, errors } = await openSignedIn(browser, stage, "zh-CN", "phone");
  const view = page.locator(`[data-test=session-view][data-session-id="${sessionId}"]`);
  await view.waitFor({ timeout: 10_000 });
  // Phone first: the instruction box is there without picking a card, and nothing scrolls sideways.
  assert.equal(await page.locator("[data-test=instruction]").isEnabled(), true, "the instruction box is ready for the only session");

  // 1. Finished: a tool-error notice on the way (a tool the session lacks), progress after each
  // tool call, then a markdown reply carrying HTML.
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("lint", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage([ai.fauxToolCall("echo", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage(REPLY),
  ]);
  await pi.prompt("更新 README");
  const done = view.locator("[data-test=run][data-outcome=done]");
  await done.waitFor({ timeout: 15_000 });
  assert.match(await done.locator("[data-test=run-latest]").innerText(), /^最新进度：.*已完成 2 次工具调用/);
  await page.locator("[data-test=timeline-say]", { hasText: "work 的工具出错：" }).first().waitFor({ timeout: 10_000 });
  const reply = done.locator("[data-test=run-reply]");
  assert.match(await reply.innerHTML(), /<strong>README<\/strong>/, "markdown rendered");
  assert.equal(await reply.locator("img, script").count(), 0, "no image fetched, no script");
  assert.match(
    await reply.innerText(),
    /<img src="https:\/\/evil\.example\/x\.png" onerror="alert\(1\)"> <script>alert\(1\)<\/script>/,
    "the HTML shows as text",
  );
  assert.match(await done.locator("[data-test=run-duration]").innerText(), /^用时 /);

  // 2. Failed.
  pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "invalid api key" })]);
  await pi.prompt("再试一次");
  const failed = view.locator("[data-test=run][data-outcome=failed]");
  await failed.waitFor({ timeout: 15_000 });
  assert.match(await failed.locator("[data-test=run-outcome]").innerText(), /^失败：/);

  // 3. Stopped from the page, by its stop button.
  const streaming = latch();
  pi.script([waitForAbortStep(streaming.signal)]);
  const run = pi.prompt("写一篇很长的文章");
  await streaming.promise;
  await view.locator("[data-test=run][data-outcome=running]").waitFor({ timeout: 15_000 });
  await page.locator(`[data-test=session][data-session-id="${sessionId}"] [data-test=stop]`).click();
  await run;
  const stopped = view.locator("[data-test=run][data-outcome=stopped]");
  await stopped.waitFor({ timeout: 15_000 });
  assert.equal(await stopped.locator("[data-test=run-outcome]").innerText(), "被你（此页面）打断");
  assert.match(await stopped.locator("[data-test=run-duration]").innerText(), /^用时 /);
  assert.deepEqual(
    await view.locator("[data-test=run]").evaluateAll((runs) => runs.map((run) => run.getAttribute("data-outcome"))),
    ["stopped", "failed", "done"],
    "newest first",
  );

  // The timeline in words, no raw codes or English state words; the log persona told nobody, and says so.
  await page.locator("[data-test=timeline-say]", { hasText: "只打印在服务端终端：没有人格，没有告诉任何人" }).first().waitFor({ timeout: 10_000 });
  await page.locator("[data-test=timeline-say]", { hasText: "Pi 在 work 完成了：更新 README" }).first().waitFor({ timeout: 10_000 });
  const words = (await page.locator("[data-test=timeline-say]").allInnerTexts()).join("\n");
  assert.doesNotMatch(words, /event\.|command\.|\bstopped\b|\bapplied\b|EXTERNAL_AUTOMATION_EVENT/);

  // 4. Waiting for you: the session wants to run `rm -rf build`; the exact command and the answer
  // buttons are in its view, above the run that waits on it (left open for the screenshots).
  mkdirSync(join(pi.cwd, "build"), { recursive: true });
  pi.script([rmBuild(), ai.fauxAssistantMessage("删好了。")]);
  const cleaning = pi.prompt("清理构建目录");
  const approval = view.locator("[data-test=approval][data-state=pending]");
  await approval.waitFor({ timeout: 15_000 });
  assert.match(await approval.innerText(), /rm -rf build/);
  await view.locator("[data-test=run][data-outcome=running]", { hasText: "清理构建目录" }).waitFor({ timeout: 15_000 });

  mkdirSync(IMAGES, { recursive: true });
  for (const [locale, other] of [
    ["zh-CN", page],
    ["en-US", null],
  ] as const) {
    for (const size of ["phone", "desktop"] as const) {
      const opened = other && size === "phone" ? { page: other, errors } : await openSignedIn(browser, stage, locale, size);
      const shown = opened.page.locator(`[data-test=session-view] [data-test=run]`).first();
      await shown.waitFor({ timeout: 10_000 });
      const overflow = await opened.page.locator(".anon-console").evaluate((node) => node.scrollWidth > node.clientWidth + 1);
      assert.equal(overflow, false, `${locale} ${size}: no horizontal scrolling`);
      if (locale === "en-US") {
        assert.match(await opened.page.title(), /Pi sessions/, "the page's title in English");
        assert.equal(await opened.page.locator("[data-test=run][data-outcome=stopped] [data-test=run-outcome]").innerText(), "stopped by you (this page)");
        const headings = (await opened.page.locator(".anon-console h2").allInnerTexts()).join("\n");
        assert.doesNotMatch(headings, /[\u4e00-\u9fff]/, "no Chinese in the English page's headings");
        // The session's own words (its tasks, the agent's replies, and the Pi side's notice texts the
        // page cannot word itself, written in Chinese here) may be Chinese; every other line the page writes is English.
        const data = (await stage.koishi.app.database.get(EVENT_TABLE, {}, ["body"]))
          .flatMap((row) => {
            const event = EventBody.parse(JSON.parse(row.body));
            // The agent's own words in a line the page words itself (details.said) stay as they came.
            return [event.task, event.summary, readSaid(event)?.agent];
          })
          .filter((text): text is string => !!text)
          .map((text) => text.replace(/[*`\s]+/g, ""));
        const pageOwn = (await opened.page.locator(".anon-console").innerText())
          .split("\n")
          .filter((line) => /\p{Script=Han}/u.test(line))
          .map((line) => line.replace(/[*`\s]+/g, ""))
          .filter((line) => !data.some((text) => text.includes(line)))
          .map((line) => data.reduce((rest, text) => rest.replaceAll(text, ""), line))
          .filter((rest) => /\p{Script=Han}/u.test(rest));
        assert.deepEqual(pageOwn, [], "no Chinese on the English page but the session's own words");
      }
      // On a phone the page-wide line opens the session's view, scrolled to its approval.
      if (size === "phone") await opened.page.locator("[data-test=waiting-item]").first().click();
      await opened.page.screenshot({ path: join(IMAGES, `console-${size}-${locale}.png`), fullPage: size === "phone" });
      if (opened.page !== page) {
        assert.deepEqual(
          opened.errors.filter((message) => message !== "Illegal invocation"),
          [],
          `${locale} ${size}: no errors`,
        );
        await opened.page.close();
      }
    }
  }

  // Approved in the session's view: the command runs and the run finishes.
  await approval.locator("[data-test=approve]").click();
  await cleaning;
  await view.locator("[data-test=run][data-outcome=done]", { hasText: "清理构建目录" }).waitFor({ timeout: 15_000 });
  assert.equal(existsSync(join(pi.cwd, "build")), false, "approved: the command ran");
  assert.deepEqual(
    errors.filter((message) => message !== "Illegal invocation"),
    [],
    "no errors in the page",
  );
});
