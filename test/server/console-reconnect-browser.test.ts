/**
 * The console page across server restarts, in a real headless browser against real `npm start`:
 * the token did not change, so the page signs itself in again each time, once per connection, and
 * never asks for the token. Skipped, saying so, when no Chromium is installed.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { CHROMIUM_SKIP, consoleBrowser, standaloneConsole } from "../helpers/console.ts";
import { waitUntil } from "../../harness/wait.ts";

const RESTARTS = 3;

test("after each restart of npm start (same token) the open page signs in again by itself, once per connection, never showing the sign-in form", {
  skip: CHROMIUM_SKIP,
  timeout: 240_000,
}, async (t) => {
  const browser = await consoleBrowser(t);
  const stage = await standaloneConsole(t);
  const page = await browser.newPage({ locale: "zh-CN" });
  const pageErrors: string[] = [];
  page.on("pageerror", (error) => pageErrors.push(error.message));
  let sockets = 0;
  let signIns = 0;
  page.on("websocket", (socket) => {
    sockets++;
    socket.on("framesent", (frame) => {
      if (String(frame.payload).includes('"type":"anon-notify/sign-in"')) signIns++;
    });
  });

  await page.goto(stage.link.href);
  const gate = page.locator("[data-test=gate]");
  await gate.waitFor({ timeout: 30_000 });
  assert.equal(signIns, 1);
  // Run in the page (this project's types have no DOM): every sign-in form shown, with its state.
  await page.evaluate(`{
    window.signInSeen = [];
    new MutationObserver(() => {
      const form = document.querySelector("[data-test=sign-in]");
      if (form) window.signInSeen.push(form.getAttribute("data-state") ?? "?");
    }).observe(document.body, { childList: true, subtree: true, attributes: true });
  }`);

  for (let round = 1; round <= RESTARTS; round++) {
    const before: { sockets: number; signIns: number } = { sockets, signIns };
    await stage.restart();
    // Back on its own: a new connection, signed in, the data shown; nobody opens the page again.
    await waitUntil(
      async () => sockets > before.sockets && signIns > before.signIns && new URL(page.url()).pathname === "/anon-notify" && (await gate.isVisible()),
      () => `restart ${round}: the page signed in again by itself; at ${page.url()}, ${signIns - before.signIns} sign-ins`,
      45_000,
    );
    assert.equal(signIns - before.signIns, 1, `restart ${round}: one sign-in for the one new connection`);
  }
  assert.deepEqual(await page.evaluate("window.signInSeen"), [], "the sign-in form never showed");
  assert.ok(await page.locator("[data-test=send-section]").isVisible());
  // @koishijs/client reconnects with `.then(location.reload)`, which throws unbound: the console's own.
  assert.deepEqual(
    pageErrors.filter((message) => message !== "Illegal invocation"),
    [],
    "no errors in the page",
  );
});
