/**
 * The newcomer's path on the Pi side, in each language: a REAL Pi session (SDK, faux model) with
 * `language` set, against the REAL standalone server (`npm start`, the documented trial): switch
 * on, one task and its notice, `/anon-notify-doctor test`, switch off. Everything the person reads
 * in Pi (notifications, footer), what `npm start` prints and the notice's text is in that language alone: no Chinese under
 * en-US; under zh-CN no English words but names and codes (the allow-list below).
 */
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

/** English words a Chinese text may hold: names, codes and config keys, never prose. */
const NAMES_AND_CODES = new Set(
  (
    "Anon QQ Pi Agent npm start outbox token endpoint recipient anonQq qq language enabled tokenFile projectConfig LANG " +
    "events commands test queued processing context_injected delivered failed ok unknown not_configured bot_not_found no_persona " +
    "YesImBot notify webhook doctor anon notify true false zh CN " +
    // npm start's text: names, config keys and keys to press
    "Token Koishi README botId recipientId delivery Ctrl C run ntfy setup " +
    // the server's capability codes
    "approvals audit command_images context_usage direct long_poll presence"
  ).split(" "),
);

/** What is left of a Chinese text once paths, URLs, ids, quoted values and allowed names are taken out. */
function strayEnglish(text: string): string[] {
  const words = text
    .replace(/"[^"]*"/g, " ") // config values as JSON
    .replace(/\S*[/:@\\]\S*/g, " ") // paths, URLs, event ids, commands like /anon-notify
    .replace(/[A-Za-z_]+(\.[A-Za-z_]+)+/g, " ") // config keys (delivery.timeoutMs)
    .match(/[A-Za-z][A-Za-z_]*/g);
  // snake_case words are codes (capabilities, reasons, states)
  return (words ?? []).filter((word) => !NAMES_AND_CODES.has(word) && !word.includes("_"));
}

for (const language of ["en-US", "zh-CN"] as const) {
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
    const started = server
      .output()
      .replace(/\[EXTERNAL_AUTOMATION_EVENT\][\s\S]*?\[\/EXTERNAL_AUTOMATION_EVENT\]/g, "")
      .split("\n")
      .filter((line) => !line.includes(" && ") && !/^\[\w\] (?!notify-webhook )\S+ /.test(line))
      .map((line) => line.replace(/^\[\w\] notify-webhook /, ""));
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
    if (language === "en-US")
      assert.deepEqual(
        read.filter((text) => /\p{Script=Han}/u.test(text)),
        [],
        "no Chinese text",
      );
    else assert.deepEqual(read.flatMap(strayEnglish), [], `no English words but names and codes:\n${read.join("\n")}`);
  });
}
