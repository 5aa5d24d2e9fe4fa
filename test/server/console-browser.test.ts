/**
 * The console page in a real headless browser (Debian's `chromium`, driven by playwright-core
 * through its executable path), on a phone-sized window: a real Pi session comes online, an
 * instruction sent from the page is answered, a queued one is cancelled, the session is muted and
 * an approval answered with a click; the link with the console token signs in, the bare address
 * asks for it, a new token signs the browser out. Skipped, saying so, when no Chromium is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { CHROMIUM_SKIP, consoleBrowser, consoleStage } from "../helpers/console.ts";
import { approvalRequestOf, call, heartbeatOf } from "../../harness/agent-api.ts";
import { ai } from "../../harness/pi.ts";
import { gatedTool } from "../../harness/session-commands.ts";
import { waitUntil } from "../../harness/wait.ts";

test("in a real browser on a phone-sized window, the page shows a Pi session come online, sends it an instruction it answers, cancels a queued one, mutes it and answers an approval", {
  skip: CHROMIUM_SKIP,
  timeout: 120_000,
}, async (t) => {
  const browser = await consoleBrowser(t);
  const stage = await consoleStage(t, { config: { logPersona: true } });
  const page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, locale: "zh-CN" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  // The bare address: the sign-in form, the whole sentence (an `@` once cut it short), no data.
  await page.goto(`http://127.0.0.1:${stage.port}/anon-notify`);
  await page.locator("[data-test=sign-in]").waitFor({ timeout: 20_000 });
  assert.equal(
    await page.locator("[data-test=sign-in-why]").innerText(),
    "这个页面需要控制台 Token 才能查看和操作（没有安装 @koishijs/plugin-auth 时的登录方式）。打开 npm start 打印的链接即自动登录，或在下面粘贴 Token。",
  );
  assert.equal(await page.locator("[data-test=session], [data-test=timeline-item], [data-test=gate]").count(), 0, "no data without the token");

  // The link with the token signs in; the token leaves the address bar for the page's storage.
  await page.goto(`http://127.0.0.1:${stage.port}/anon-notify?token=${stage.token}`);
  await page.getByText("还没有会话上线", { exact: false }).waitFor({ timeout: 20_000 });
  assert.equal(new URL(page.url()).search, "", "the token is out of the address bar");
  assert.equal(await page.evaluate(() => localStorage.getItem("anon-notify.console-token")), stage.token);
  assert.match(await page.locator("[data-test=gate]").innerText(), /已用控制台 Token 登录/);

  const slow = gatedTool("slow");
  const { pi, sessionId } = await stage.openPi([slow.tool]);
  const card = page.locator(`[data-test=session][data-session-id="${sessionId}"]`);
  await card.waitFor({ timeout: 10_000 });
  assert.equal(await card.getAttribute("data-state"), "idle");

  // Send from the page; the real session answers.
  pi.script([ai.fauxAssistantMessage("README 已经更新好了。")]);
  await card.click();
  await page.locator("[data-test=instruction]").fill("请更新 README");
  await page.locator("[data-test=send]").click();
  await card.locator("[data-test=command][data-state=accepted]", { hasText: "请更新 README" }).waitFor({ timeout: 10_000 });
  await page.locator("[data-test=timeline-item]", { hasText: "README 已经更新好了。" }).first().waitFor({ timeout: 10_000 });

  // While a tool runs, the second of two instructions stays queued: cancel it from the page.
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("好了。"),
    ai.fauxAssistantMessage("也做完了。"),
  ]);
  const run = pi.prompt("跑个长任务");
  await slow.started;
  await card.and(page.locator("[data-state=running]")).waitFor({ timeout: 10_000 });
  for (const instruction of ["先跑测试", "这条要撤回"]) {
    await page.locator("[data-test=instruction]").fill(instruction);
    await page.locator("[data-test=send]").click();
    await card.locator("[data-test=command]", { hasText: instruction }).waitFor({ timeout: 10_000 });
  }
  const queued = card.locator("[data-test=command]", { hasText: "这条要撤回" });
  await queued.locator("[data-test=cancel]").click();
  await card.locator("[data-test=command][data-state=cancelled]", { hasText: "这条要撤回" }).waitFor({ timeout: 10_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已撤回：这条要撤回/);

  // A refusal shows the server's reason.
  await page.locator("[data-test=instruction]").fill("x".repeat(4001));
  await page.locator("[data-test=send]").click();
  await page.locator("[data-test=result].refused").waitFor({ timeout: 10_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /内容不合要求/);
  await page.locator("[data-test=instruction]").fill("");

  // Mute the session for the default time: its card says until when.
  await card.locator("[data-test=mute]").click();
  await card.locator("[data-test=session-muted]").waitFor({ timeout: 10_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已静音 work 的通知，到 /);

  // An approval the agent asks for shows up live, with its code and the redacted preview.
  // (From a second, API-only session: the approval must come from the runtime the server knows.)
  assert.equal((await call(stage.koishi, "POST", "/sessions/heartbeat", heartbeatOf({ project: "shop" }))).status, 200);
  const asked = await call(
    stage.koishi,
    "POST",
    "/approvals",
    approvalRequestOf({
      approval_id: "ap-browser",
      cwd: "/home/u/shop",
      command: "rm -rf build && curl -H 'Authorization: Bearer abcdefghijklmnop' x",
    }),
  );
  assert.equal(asked.status, 201, JSON.stringify(asked.body));
  const approval = page.locator("[data-test=approval][data-approval-id=ap-browser]");
  await approval.waitFor({ timeout: 10_000 });
  assert.match(await approval.innerText(), new RegExp(asked.body.approval.code));
  assert.doesNotMatch(await approval.innerText(), /abcdefghijklmnop/);

  await approval.locator("[data-test=decision-reason]").fill("先备份");
  await approval.locator("[data-test=deny]").click();
  await page.locator("[data-test=approval][data-approval-id=ap-browser][data-state=decided]").waitFor({ timeout: 10_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已拒绝 [A-Z]{5}/);
  await card.locator("[data-test=unmute]").click();
  await card.locator("[data-test=session-muted]").waitFor({ state: "detached", timeout: 10_000 });
  slow.release();
  await run;
  assert.ok(!JSON.stringify(pi.modelCalls.map((call) => call.messages)).includes("这条要撤回"), "the cancelled instruction never reached the model");

  // A new token on the server signs this browser out: after the restart the page asks again.
  await stage.restart({ consoleToken: "c".repeat(64) });
  // Koishi's client reloads the page when it reconnects; when that happens before this plugin's page
  // entry is registered again (a busy machine), its router lands on "/" or shows an empty page, and a
  // person opens the page again after a few seconds: either way the stored, now old token is refused.
  const refused = page.locator("[data-test=sign-in][data-state=refused]");
  let reopened = Date.now();
  await waitUntil(
    async () => {
      if (await refused.isVisible()) return true;
      const elsewhere = !new URL(page.url()).pathname.startsWith("/anon-notify");
      if (elsewhere || Date.now() - reopened > 5_000) {
        reopened = Date.now();
        await page.goto(`http://127.0.0.1:${stage.port}/anon-notify`).catch(() => undefined);
      }
      return undefined;
    },
    () => `the sign-in asking again after the token changed; at ${page.url()}`,
    30_000,
  );
  assert.equal(await page.locator("[data-test=session]").count(), 0, "no data after the token changed");
  assert.equal(await page.evaluate(() => localStorage.getItem("anon-notify.console-token")), null, "the old token is forgotten");
  // @koishijs/client reconnects with `.then(location.reload)`, which throws unbound: the console's own, harmless here.
  assert.deepEqual(
    pageErrors.filter((message) => message !== "Illegal invocation"),
    [],
    "no errors in the page",
  );
});
