/**
 * A run typed in the terminal (not an instruction) and stopped from the console before any notice
 * arrived: the server learns of it only from the stop's ACK, which carries the run (protocol.md,
 * "Command protocol 3", stop). Through a real Pi session and the console's real WebSocket protocol,
 * then in the page (Debian's Chromium, when installed) in both languages.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { CommandSummary } from "../../protocol/queue.ts";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage } from "../helpers/console.ts";
import { latch, waitForAbortStep } from "../../harness/pi.ts";
import type { RunView } from "../../server/console/run-rules.ts";
import { waitUntil } from "../../harness/wait.ts";

test("a run typed in the terminal and stopped from the page before any notice shows in the session view with its task (redacted, as text) and a duration", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, {
    // No notice at all before the stop: start and progress notices off, as by default.
    userConfig: { notify: { started: false, progress: false, completed: true, failed: true, toolError: false } },
  });
  const page = await stage.openSignedIn();
  const { pi, sessionId } = await stage.openPi();
  await page.until((view) => view.sessions.find((session) => session.session_id === sessionId)?.state === "idle", "the session online and idle");

  const streaming = latch();
  pi.script([waitForAbortStep(streaming.signal)]);
  const before = new Date().toISOString();
  // Typed by the person (pi.prompt, not an instruction): markup and a literal secret in it.
  const run = pi.prompt("整理日志 <img src=x onerror=alert(1)> API_TOKEN=abcdef1234567890");
  await streaming.promise;
  const stopped = await page.call("anon-notify/stop", { session_id: sessionId });
  assert.ok(stopped.ok, JSON.stringify(stopped));
  assert.equal(CommandSummary.parse(stopped.value).outcome, "stopped");
  await run;

  const runs = await waitUntil(async () => {
    const answer = await page.call<{ session_id: string; runs: RunView[] }>("anon-notify/session", { session_id: sessionId });
    return answer.ok && answer.value.runs[0]?.outcome === "stopped" ? answer.value.runs : undefined;
  }, "the stopped run in the session's runs");
  assert.equal(runs.length, 1, JSON.stringify(runs));
  const [view] = runs;
  assert.equal(view!.task, "整理日志 <img src=x onerror=alert(1)> API_TOKEN=***");
  assert.equal(view!.stopped_by, "console");
  assert.ok(view!.started_at && view!.started_at >= before && view!.ended_at && view!.started_at <= view!.ended_at, JSON.stringify(view));
  assert.equal(view!.duration_ms, Date.parse(view!.ended_at!) - Date.parse(view!.started_at), JSON.stringify(view));

  await t.test("the session view shows it, the task as text, with how long it took, in both languages", { skip: CHROMIUM_SKIP }, async (t) => {
    const browser = await consoleBrowser(t);
    for (const [locale, outcome, took] of [
      ["zh-CN", "被你（此页面）打断", /^用时 /],
      ["en-US", "stopped by you (this page)", /^took /],
    ] as const) {
      const page = await browser.newPage({ locale });
      await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
      const run = page.locator(`[data-test=session-view][data-session-id="${sessionId}"] [data-test=run][data-outcome=stopped]`);
      await run.waitFor({ timeout: 20_000 });
      assert.equal(await run.locator("[data-test=run-task]").innerText(), "整理日志 <img src=x onerror=alert(1)> API_TOKEN=***", locale);
      assert.equal(await run.locator("[data-test=run-task] img").count(), 0, `${locale}: markup stays text`);
      assert.equal(await run.locator("[data-test=run-outcome]").innerText(), outcome);
      assert.match(await run.locator("[data-test=run-duration]").innerText(), took, locale);
      await page.close();
    }
  });
});
