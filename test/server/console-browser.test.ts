/**
 * The console page in a real headless browser (Debian's `chromium`, driven by playwright-core
 * through its executable path), on a phone-sized window, against `npm start` as a person runs it:
 * the bare address asks for the token and shows nothing; the link `npm start` printed signs in; a
 * real Pi session comes online, an instruction sent from the page is answered, a queued one is
 * cancelled in the session's view, the session is muted, an approval is answered in its session's
 * view and a run is stopped; a new token signs the browser out. Skipped, saying so, when no Chromium
 * is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { CHROMIUM_SKIP, consoleBrowser, standaloneConsole } from "../helpers/console.ts";
import { agentApi, approvalRequestOf, call } from "../../harness/agent-api.ts";
import { ai, latch, waitForAbortStep } from "../../harness/pi.ts";
import { gatedTool } from "../../harness/session-commands.ts";
import { TOKEN_LIFETIME_MS } from "../../console/client/sign-in-steps.ts";

test("npm start's printed link signs a real browser in on a phone-sized window: a Pi session comes online, answers an instruction, a queued one is cancelled, it is muted, an approval is answered in its session's view, a run is stopped; a new token signs the browser out", {
  skip: CHROMIUM_SKIP,
  timeout: 180_000,
}, async (t) => {
  const browser = await consoleBrowser(t);
  const stage = await standaloneConsole(t);
  const origin = stage.link.origin;
  const page = await browser.newPage({ viewport: { width: 390, height: 844 }, deviceScaleFactor: 2, locale: "zh-CN" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));

  // The bare address: the sign-in form, the whole sentence (an `@` once cut it short), no data.
  await page.goto(`${origin}/anon-notify`);
  await page.locator("[data-test=sign-in]").waitFor({ timeout: 30_000 });
  assert.equal(
    await page.locator("[data-test=sign-in-why]").innerText(),
    "这个页面需要控制台 Token 才能查看和操作（没有安装 @koishijs/plugin-auth 时的登录方式）。打开 npm start 打印的链接即自动登录，或在下面粘贴 Token。",
  );
  assert.equal(await page.locator("[data-test=session], [data-test=timeline-item], [data-test=gate]").count(), 0, "no data without the token");

  // The printed link signs in; the token leaves the address bar for the page's storage.
  const token = stage.link.searchParams.get("token");
  await page.goto(stage.link.href);
  await page.getByText("还没有会话上线", { exact: false }).waitFor({ timeout: 30_000 });
  assert.equal(new URL(page.url()).search, "", "the token is out of the address bar");
  // In this tab's sessionStorage with a lifetime, never in localStorage (every console plugin's script reads it).
  const kept = await page.evaluate(() => [sessionStorage.getItem("anon-notify.console-token"), localStorage.getItem("anon-notify.console-token")]);
  const parsed = JSON.parse(kept[0] ?? "null") as { token: string; until: number } | null;
  assert.equal(parsed?.token, token);
  assert.ok(parsed && parsed.until > Date.now() && parsed.until <= Date.now() + TOKEN_LIFETIME_MS, "a lifetime");
  assert.equal(kept[1], null, "nothing in localStorage");
  assert.match(await page.locator("[data-test=gate]").innerText(), /已用控制台 Token 登录/);

  const slow = gatedTool("slow");
  const { pi, sessionId } = await stage.openPi([slow.tool]);
  const card = page.locator(`[data-test=session][data-session-id="${sessionId}"]`);
  const view = page.locator(`[data-test=session-view][data-session-id="${sessionId}"]`);
  await card.waitFor({ timeout: 15_000 });
  assert.equal(await card.getAttribute("data-state"), "idle");

  // Send from the page (the only session is already the target); the real session answers.
  pi.script([ai.fauxAssistantMessage("README 已经更新好了。")]);
  await page.locator("[data-test=instruction]").fill("请更新 README");
  await page.locator("[data-test=send]").click();
  await view.locator("[data-test=command][data-state=accepted]", { hasText: "请更新 README" }).waitFor({ timeout: 15_000 });
  await page.locator("[data-test=timeline-item]", { hasText: "README 已经更新好了。" }).first().waitFor({ timeout: 15_000 });

  // While a tool runs, the second of two instructions stays queued: the card counts it, the
  // session's view lists it with its state, and it is cancelled there.
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("好了。"),
    ai.fauxAssistantMessage("也做完了。"),
  ]);
  const run = pi.prompt("跑个长任务");
  await slow.started;
  await card.and(page.locator("[data-state=running]")).waitFor({ timeout: 15_000 });
  // Typed in the terminal with start notices off (the default): the view still says it runs (its
  // tool too, once a heartbeat names it: not waited for here).
  await view.locator("[data-test=run-now]", { hasText: "正在运行" }).waitFor({ timeout: 15_000 });
  for (const instruction of ["先跑测试", "这条要撤回"]) {
    await page.locator("[data-test=instruction]").fill(instruction);
    await page.locator("[data-test=send]").click();
    await view.locator("[data-test=command]", { hasText: instruction }).waitFor({ timeout: 15_000 });
  }
  await card.locator("[data-test=session-queued]", { hasText: "2 条指令排队" }).waitFor({ timeout: 15_000 });
  const queued = view.locator("[data-test=command][data-state=pending]", { hasText: "这条要撤回" });
  await queued.locator("[data-test=cancel]").click();
  await view.locator("[data-test=command][data-state=cancelled]", { hasText: "这条要撤回" }).waitFor({ timeout: 15_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已撤回：这条要撤回/);

  // A refusal shows the server's reason.
  await page.locator("[data-test=instruction]").fill("x".repeat(4001));
  await page.locator("[data-test=send]").click();
  await page.locator("[data-test=result].refused").waitFor({ timeout: 15_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /内容不合要求/);
  await page.locator("[data-test=instruction]").fill("");

  // Mute the session for the default time: its card says until when.
  await card.locator("[data-test=mute]").click();
  await card.locator("[data-test=session-muted]").waitFor({ timeout: 15_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已静音 work 的通知，到 /);

  // An approval the agent asks for: the page-wide line says it waits, and opens its session's view,
  // where the exact command (redacted) and the answer buttons are. (From a second, API-only session:
  // the approval must come from a runtime the server knows.)
  const agent = { baseUrl: stage.server.baseUrl, token: stage.agentToken };
  const shop = () => agentApi(agent).heartbeat({ session_id: "s-shop", project: "shop" });
  assert.equal((await shop()).status, 200);
  // Kept alive while the page answers, however slow the machine: an approval of a gone session ends.
  const alive = setInterval(() => void shop().catch(() => undefined), 5_000);
  t.after(() => clearInterval(alive));
  const asked = await call(
    agent,
    "POST",
    "/approvals",
    approvalRequestOf({
      approval_id: "ap-browser",
      session_id: "s-shop",
      cwd: "/home/u/shop",
      command: "rm -rf build && curl -H 'Authorization: Bearer abcdefghijklmnop' x",
    }),
  );
  assert.equal(asked.status, 201, JSON.stringify(asked.body));
  const waiting = page.locator("[data-test=waiting-item][data-approval-id=ap-browser]");
  await waiting.waitFor({ timeout: 15_000 });
  assert.match(await waiting.innerText(), new RegExp(`${asked.body.approval.code} · shop`));
  await page.locator(`[data-test=session][data-session-id=s-shop] [data-test=session-waiting]`, { hasText: "1 项待审批" }).waitFor({ timeout: 15_000 });
  await waiting.click();
  const approval = page.locator("[data-test=session-view][data-session-id=s-shop] [data-test=approval][data-approval-id=ap-browser]");
  await approval.waitFor({ timeout: 15_000 });
  assert.match(await approval.innerText(), new RegExp(asked.body.approval.code));
  assert.match(await approval.locator("[data-test=approval-preview]").innerText(), /rm -rf build/);
  assert.doesNotMatch(await approval.innerText(), /abcdefghijklmnop/);
  await approval.locator("[data-test=decision-reason]").fill("先备份再删");
  await approval.locator("[data-test=approve]").click();
  await approval.and(page.locator("[data-state=decided]")).waitFor({ timeout: 15_000 });
  assert.match(await page.locator("[data-test=result]").innerText(), /已批准 [A-Z]{5}/);
  clearInterval(alive);

  // Back to the Pi session: unmute it, let its run finish.
  await card.click();
  await card.locator("[data-test=unmute]").click();
  await card.locator("[data-test=session-muted]").waitFor({ state: "detached", timeout: 15_000 });
  slow.release();
  await run;
  assert.ok(!JSON.stringify(pi.modelCalls.map((call) => call.messages)).includes("这条要撤回"), "the cancelled instruction never reached the model");

  // Stop a run from the page: the session confirms, the page says so, its view shows who stopped it.
  const streaming = latch();
  pi.script([waitForAbortStep(streaming.signal)]);
  const long = pi.prompt("写一篇很长的文章");
  await streaming.promise;
  await card.and(page.locator("[data-state=running]")).waitFor({ timeout: 15_000 });
  await card.locator("[data-test=stop]").click();
  await long;
  await page.locator("[data-test=result]", { hasText: "已打断 work" }).waitFor({ timeout: 15_000 });
  await view.locator("[data-test=run][data-outcome=stopped] [data-test=run-outcome]", { hasText: "被你（此页面）打断" }).waitFor({ timeout: 15_000 });

  // A new token (the file deleted, npm start again) signs this browser out: the page asks again.
  await stage.rotate();
  assert.notEqual(stage.link.searchParams.get("token"), token);
  // The open page reconnects and presents its stored token by itself; nobody opens it again.
  await page.locator("[data-test=sign-in][data-state=refused]").waitFor({ timeout: 45_000 });
  assert.equal(await page.locator("[data-test=session]").count(), 0, "no data after the token changed");
  assert.equal(await page.evaluate(() => sessionStorage.getItem("anon-notify.console-token")), null, "the old token is forgotten");
  // @koishijs/client reconnects with `.then(location.reload)`, which throws unbound: the console's own, harmless here.
  assert.deepEqual(
    pageErrors.filter((message) => message !== "Illegal invocation"),
    [],
    "no errors in the page",
  );
});
