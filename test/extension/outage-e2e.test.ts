/**
 * A server restart as the person in Pi lives it: a REAL Pi session (SDK, faux model) switched on
 * against the REAL standalone server (`npm start` as a child process), which is killed and
 * started again on the same port and data folder. While it is away the footer says so (since when,
 * notices held); the heartbeat's failures, the restarting server's 404s and the `409
 * session_offline` claims after it are not warnings; its return and what was sent are said once.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { footerText, messagesFor } from "../../extension/texts/messages.ts";
import { STATUS_KEY } from "../../protocol/state-bus.ts";
import { freePort } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";
import { TEST_QQ, configureExtension } from "../../harness/webhook.ts";

const en = messagesFor("en-US");
const HAN = /\p{Script=Han}/u;

test("through a real Pi session, a server restart is one footer state, not warnings; its end and the held notice are said once", {
  timeout: 180_000,
}, async (t) => {
  const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-outage-"));
  const port = await freePort();
  const servers: Standalone[] = [];
  const serve = async () => {
    const server = await spawnStandalone(dataDir, port);
    servers.push(server);
    return server;
  };
  const first = await serve();
  const root = makeRoot();
  const savedEnv = { ...process.env };
  configureExtension(
    root,
    `${first.baseUrl}/events`,
    { language: "en-US", presence: { heartbeatIntervalMs: 1_000 }, delivery: { timeoutMs: 2_000, maxAttempts: 1, backoffMs: 0 } },
    readFileSync(join(dataDir, "token"), "utf8").trim(),
  );
  const pi = await startPi({ root });
  t.after(async () => {
    await pi.dispose();
    await Promise.all(servers.map((server) => server.kill()));
    process.env = savedEnv;
    rmSync(dataDir, { recursive: true, force: true });
  });
  const footer = () => pi.statusText(STATUS_KEY) ?? "";
  const footerSays = (pattern: RegExp, what: string) =>
    waitUntil(
      () => (pattern.test(footer()) ? true : undefined),
      () => `${what}; footer: ${footer()}`,
      60_000,
    );

  await pi.prompt("/anon-notify");
  await footerSays(/^Anon notices: on → QQ/, "switched on");
  // The session is known to the server (its first heartbeat was answered) before the server goes.
  await waitUntil(() => (pi.notices().some((n) => n.startsWith("Anon notices are on")) ? true : undefined), "switched on", 30_000);

  // SIGKILL, as a crash or a power cut: Ctrl-C on npm start has been seen to wait for a held long poll here.
  await first.kill();
  await footerSays(/ · server unreachable since \S+/, "the outage shows in the footer");
  pi.script([ai.fauxAssistantMessage("All tests pass.")]);
  await pi.prompt("run the tests");
  await footerSays(/ · server unreachable since .+, notices held: 1$/, "the held final shows in the footer");

  const second = await serve();
  const back = /^The notify server is back \(it was unreachable for about .+\)\.$/;
  await waitUntil(
    () => (pi.notices().some((n) => back.test(n)) ? true : undefined),
    () => `the return is said: ${pi.notices().join("\n")}`,
    60_000,
  );
  await waitUntil(
    () => (pi.notices().includes(en.delivery.resent(1)) ? true : undefined),
    () => `what was sent is said: ${pi.notices().join("\n")}`,
    60_000,
  );
  await waitUntil(
    () => (second.injected.some((id) => id.endsWith(":completed")) ? true : undefined),
    () => `the held final reached the persona: ${second.output()}`,
    30_000,
  );
  // The plain standalone server has no chat, and says so: the note the switch-on gave stays.
  const normal = footerText(en, "active", true, { qq: TEST_QQ, note: "no_chat" });
  await waitUntil(
    () => (footer() === normal ? true : undefined),
    () => `the footer is back to normal; footer: ${footer()}`,
    60_000,
  );
  // A few more heartbeats and claims after the return: the restart's aftermath stays quiet too.
  await new Promise((resolve) => setTimeout(resolve, 3_000));

  const notices = pi.notices();
  assert.equal(notices.filter((n) => back.test(n)).length, 1, `the return is said once:\n${notices.join("\n")}`);
  assert.equal(notices.filter((n) => n === en.delivery.resent(1)).length, 1, "what was sent is said once");
  for (const noise of ["Presence heartbeat failed", "Claiming Anon", "HTTP 404", "session_offline", "not delivered"]) {
    assert.ok(!notices.some((n) => n.includes(noise)), `no "${noise}" warning:\n${notices.join("\n")}`);
  }
  const read = [...notices, ...pi.ui.filter((call) => call.method === "setStatus").map((call) => String(call.args[1]))];
  assert.deepEqual(
    read.filter((text) => HAN.test(text)),
    [],
    "nothing the person reads is in Chinese under language en-US",
  );
});
