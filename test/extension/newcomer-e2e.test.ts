/** The newcomer's path per language against the REAL `npm start`: a Pi session (SDK) on, a notice, the doctor, off; and
 * by the README: Pi's CLI (stub model) paired by the printed line, a notice, the printed link in Chromium. No word of
 * the other language on any surface (zh-CN: names and codes only). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { messagesFor } from "../../extension/texts/messages.ts";
import { STATUS_KEY } from "../../protocol/state-bus.ts";
import { freePort } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { REPO, describeRun, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";
import { CHROMIUM_SKIP, consoleBrowser } from "../helpers/console.ts";

/** English words a Chinese text may hold: names, codes and config keys, never prose. */
const NAMES_AND_CODES = new Set(
  (
    "Anon QQ Pi Agent npm start outbox token endpoint recipient anonQq qq language enabled tokenFile projectConfig LANG " +
    "events commands test queued processing context_injected delivered failed ok unknown not_configured bot_not_found no_persona " +
    "YesImBot notify webhook doctor anon notify true false zh CN " +
    // npm start's text: names, config keys and keys to press
    "Token Koishi README botId recipientId delivery Ctrl C run ntfy setup " +
    // the server's capability codes
    "approvals audit command_images context_usage direct long_poll presence " +
    // the page: the stub model's id, its project folder, Koishi's frame
    "stub work"
  ).split(" "),
);

/** What is left of a Chinese text once paths, URLs, ids, quoted values and allowed names are taken out. */
function strayEnglish(text: string): string[] {
  const words = text
    .replace(/"[^"]*"/g, " ") // config values as JSON
    .replace(/\S*[/:@\\]\S*/g, " ") // paths, URLs, event ids, commands like /anon-notify
    .replace(/\b[0-9a-f]{8}(-[0-9a-f]{4,12})*\b/g, " ") // session ids, whole or their first eight
    .replace(/\bnpx [\w-]+|--[\w-]+/g, " ") // a command to run and its flags, as typed
    .replace(/[A-Za-z_]+(\.[A-Za-z_]+)+/g, " ") // config keys (delivery.timeoutMs)
    .match(/[A-Za-z][A-Za-z_]*/g);
  // snake_case words are codes (capabilities, reasons, states)
  return (words ?? []).filter((word) => !NAMES_AND_CODES.has(word) && !word.includes("_"));
}

/** Text of this project's in `npm start`'s output: its start text and the plugin's log lines; not Koishi's other loggers, the log persona's blocks (the agent's words as JSON) nor the shell line to copy. */
function ownServerText(output: string): string[] {
  return output
    .replace(/\[EXTERNAL_AUTOMATION_EVENT\][\s\S]*?\[\/EXTERNAL_AUTOMATION_EVENT\]/g, "")
    .split("\n")
    .filter((line) => !line.includes(" && ") && !/^\[\w\] (?!notify-webhook )\S+ /.test(line))
    .map((line) => line.replace(/^\[\w\] notify-webhook /, ""));
}

/** Fails naming what is in the other language. */
function assertOneLanguage(language: "en-US" | "zh-CN", read: string[], what: string): void {
  if (language === "en-US")
    assert.deepEqual(
      read.filter((text) => /\p{Script=Han}/u.test(text)),
      [],
      `no Chinese: ${what}`,
    );
  else assert.deepEqual(read.flatMap(strayEnglish), [], `no English words but names and codes (${what}):\n${read.join("\n")}`);
}

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) by the README: Pi's CLI paired with npm start in one line, a task's notice, the printed link in Chromium, all in one language`, {
    skip: CHROMIUM_SKIP,
    timeout: 180_000,
  }, async (t) => {
    const m = messagesFor(language);
    const browser = await consoleBrowser(t);
    const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-newcomer-cli-"));
    const server = await spawnStandalone(dataDir, await freePort(), { language });
    const { model, home } = await stubbedPiHome(t, async () => {
      await server.stop();
      rmSync(dataDir, { recursive: true, force: true });
    });
    const setup = /^ {2}(\/anon-notify-setup \S+)$/m.exec(server.output())?.[1];
    const link = /(http:\/\/\S+\/anon-notify\?token=\S+)/.exec(server.output())?.[1];
    assert.ok(setup && link, server.output());

    const task = language === "en-US" ? "what is six times seven" : "六乘七等于几";
    model.script({ text: "42" });
    const LANG = language === "en-US" ? "en_US.UTF-8" : "zh_CN.UTF-8";
    const run = await runPi(home, ["-e", REPO, "-p", "--session", join(home.root, "session.jsonl"), setup, "/anon-notify", task], { env: { LANG } });
    assert.equal(run.code, 0, describeRun(run));
    assert.equal(run.stdout.trim(), "42", describeRun(run));
    const summary = JSON.stringify(m.notice.inProject("work", "42"));
    await waitUntil(
      () => (server.output().includes(`"summary": ${summary}`) ? true : undefined),
      () => `the notice: ${server.output()}`,
      30_000,
    );

    // The printed link, in a browser set to the other language: the server's language decides.
    const page = await browser.newPage({ locale: language === "en-US" ? "zh-CN" : "en-US", viewport: { width: 1280, height: 800 } });
    await page.goto(link);
    await page.locator("[data-test=timeline-item]", { hasText: task }).first().waitFor({ timeout: 30_000 });
    const pageText = [await page.title(), await page.locator("body").innerText()];
    assert.ok(run.stderr.trim().length > 0, "Pi said something");
    assertOneLanguage(language, run.stderr.split("\n"), "Pi");
    assertOneLanguage(language, ownServerText(server.output()), "the server's log");
    assertOneLanguage(language, pageText, "the page and Koishi's frame");
  });

  test(`(${language}) the newcomer's path through a real Pi session and npm start reads in one language`, { timeout: 120_000 }, async (t) => {
    const m = messagesFor(language);
    const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-newcomer-"));
    const server = await spawnStandalone(dataDir, await freePort(), { language });
    const root = makeRoot();
    const savedEnv = { ...process.env };
    configureExtension(root, `${server.baseUrl}/events`, { language }, readFileSync(join(dataDir, "token"), "utf8").trim());
    const pi = await startPi({ root });
    t.after(async () => {
      await pi.dispose();
      await server.kill();
      process.env = savedEnv;
      rmSync(dataDir, { recursive: true, force: true });
    });

    await pi.prompt("/anon-notify");
    pi.script([ai.fauxAssistantMessage("42")]);
    await pi.prompt("what is six times seven");
    const summary = JSON.stringify(m.notice.inProject("work", "42"));
    await waitUntil(
      () => (server.output().includes(`"summary": ${summary}`) ? true : undefined),
      () => `the notice reached the server: ${server.output()}`,
      30_000,
    );
    await pi.prompt("/anon-notify-doctor test");
    await waitUntil(() => pi.notices().find((n) => n.startsWith(m.doctor.title)), "the doctor answered", 30_000);
    await pi.prompt("/anon-notify");
    assert.ok(pi.notices().includes(m.toggle.disabledNow), pi.notices().join("\n"));

    // What `npm start` printed of its own: the start text and the plugin's log lines; not Koishi's other loggers, the log
    // persona's event blocks (the agent's words as JSON) nor the shell line to copy.
    const started = ownServerText(server.output());
    const banner = language === "en-US" ? "anon-notify server started" : "anon-notify 服务端已启动";
    assert.ok(
      started.some((line) => line.startsWith(banner)),
      started.join("\n"),
    );
    const read = [
      ...started,
      summary,
      ...pi.notices(),
      ...pi.ui.filter((call) => call.method === "setStatus" && call.args[0] === STATUS_KEY).map((call) => String(call.args[1])),
    ];
    assertOneLanguage(language, read, "Pi and npm start");
  });
}
