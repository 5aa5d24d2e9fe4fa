/**
 * Pairing in one step, in each language: a REAL Pi session (SDK, faux model) with no config at all
 * against the REAL `npm start`. The printed `/anon-notify-setup` line writes the files (token 0600),
 * `/anon-notify` then switches on without `/reload` and a notice arrives; once the token file is
 * deleted, `/anon-notify` refuses at once instead of switching on with the token it read before.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dataDirFor } from "../../extension/config/config.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { parsePairingLink } from "../../extension/session/setup.ts";
import { freePort } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";

test("a pairing link is parsed into the events endpoint and the code; anything else is not a link", () => {
  assert.deepEqual(parsePairingLink(" <http://127.0.0.1:5140/api/agent-notify/v1/pair#k7m2-q9xd> "), {
    endpoint: "http://127.0.0.1:5140/api/agent-notify/v1/events",
    code: "K7M2Q9XD",
  });
  assert.deepEqual(parsePairingLink(""), { problem: "usage" });
  for (const raw of ["K7M2-Q9XD", "http://127.0.0.1:5140/api/agent-notify/v1/pair", "ftp://h/api/agent-notify/v1/pair#K7M2", "http://h/pair#K7M2"]) {
    assert.deepEqual(parsePairingLink(raw), { problem: "not_a_link" }, raw);
  }
});

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) one printed line pairs Pi with npm start; /anon-notify follows the files without /reload`, { timeout: 120_000 }, async (t) => {
    const m = messagesFor(language);
    const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-pairing-"));
    const server = await spawnStandalone(dataDir, await freePort(), { language });
    const root = makeRoot();
    const savedEnv = { ...process.env };
    for (const name of Object.keys(process.env)) if (name.startsWith("ANON_NOTIFY_")) delete process.env[name];
    process.env.LANG = process.env.LC_ALL = language === "en-US" ? "en_US.UTF-8" : "zh_CN.UTF-8";
    const pi = await startPi({ root });
    t.after(async () => {
      await pi.dispose();
      await server.kill();
      process.env = savedEnv;
      rmSync(dataDir, { recursive: true, force: true });
      rmSync(root, { recursive: true, force: true });
    });
    const piData = dataDirFor(join(root, "agent"));
    const setupLine = /^ {2}(\/anon-notify-setup \S+)$/m.exec(server.output())?.[1];
    assert.ok(setupLine, server.output());

    await pi.prompt("/anon-notify");
    assert.ok(pi.notices().includes(m.toggle.recipient(m.config.noQq, join(piData, "config.json"))), pi.notices().join("\n"));

    await pi.prompt(setupLine);
    const paired = pi.notices().at(-1) ?? "";
    assert.ok(paired.startsWith(m.setup.paired(`${server.baseUrl}/events`, join(piData, "config.json"), join(piData, "token"))), paired);
    assert.ok(paired.includes(m.toggle.route.log) && paired.endsWith(m.setup.next), paired);
    assert.equal(statSync(join(piData, "token")).mode & 0o777, 0o600);
    assert.equal(readFileSync(join(piData, "token"), "utf8").trim(), readFileSync(join(dataDir, "token"), "utf8").trim());

    await pi.prompt("/anon-notify");
    assert.ok(
      pi.notices().some((n) => n.startsWith(m.toggle.enabled("10001", "no_chat"))),
      pi.notices().join("\n"),
    );
    pi.script([ai.fauxAssistantMessage("42")]);
    await pi.prompt("what is six times seven");
    const summary = JSON.stringify(m.notice.inProject("work", "42"));
    await waitUntil(
      () => (server.output().includes(`"summary": ${summary}`) ? true : undefined),
      () => `the notice: ${server.output()}`,
      30_000,
    );

    // The same line again: the code is used up, and nothing is overwritten.
    writeFileSync(join(piData, "marker"), "");
    await pi.prompt(setupLine);
    assert.equal(pi.notices().at(-1), m.setup.failed(`${server.baseUrl}/events`, m.setup.codeRefused));

    await pi.prompt("/anon-notify");
    rmSync(join(piData, "token"));
    await pi.prompt("/anon-notify");
    assert.equal(pi.notices().at(-1), m.toggle.noToken(join(piData, "token")), "refused at once, not after a /reload");
  });
}
