/**
 * The sink through the whole extension as Pi loads it from the package root: configured only by
 * the ANON_NOTIFY_SINK_* environment, independent of `/anon-notify`, and renewed with the session.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { startSinkListener } from "../../harness/sink-listener.ts";
import { ensureSinkToken } from "../../extension/sink/token.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";

async function setup(t: TestContext, env: Record<string, string> = {}) {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-sink-ext-"));
  const root = makeRoot();
  const socket = join(dir, "notify.sock");
  const tokenFile = join(dir, "notify.token");
  const saved = { ...process.env };
  Object.assign(process.env, {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_SINK_ENABLED: "true",
    ANON_NOTIFY_SINK_SOCKET: socket,
    ANON_NOTIFY_SINK_TOKEN_FILE: tokenFile,
    ...env,
  });
  const listener = await startSinkListener({ socket, token: ensureSinkToken(tokenFile) });
  const pi = await startPi({ root });
  t.after(async () => {
    await pi.dispose();
    await listener.close();
    process.env = saved;
    rmSync(dir, { recursive: true, force: true });
  });
  return { pi, listener, tokenFile };
}

test("the loaded extension reports runs to the app without /anon-notify being switched on", async (t) => {
  const { pi, listener } = await setup(t);
  pi.script([ai.fauxAssistantMessage("hello from pi")]);
  await pi.prompt("hi");
  await listener.waitFor((events) => events.some((e) => e.type === "run.completed"));
  assert.deepEqual(
    listener.events.map((e) => e.type),
    ["run.started", "run.completed"],
  );
  assert.equal(listener.events[0]!.session_id, pi.session.sessionManager.getSessionId());
  assert.deepEqual(pi.extensionErrors, []);
});

test("a new session gets a fresh sink: its events carry the new session id and nothing is sent twice", async (t) => {
  const { pi, listener } = await setup(t);
  pi.script([ai.fauxAssistantMessage("first session")]);
  await pi.prompt("one");
  await listener.waitFor((events) => events.length === 2);
  const firstId = pi.session.sessionManager.getSessionId();
  await pi.runtime.newSession();
  pi.script([ai.fauxAssistantMessage("second session")]);
  await pi.prompt("two");
  // A second sink left behind by the first session would double each event of the second one.
  await listener.waitFor((events) => events.some((e) => e.type === "run.completed" && e.session_id !== firstId));
  const secondId = pi.session.sessionManager.getSessionId();
  assert.notEqual(firstId, secondId);
  assert.deepEqual(
    listener.events.map((e) => `${e.type}@${e.session_id === firstId ? 1 : e.session_id === secondId ? 2 : "?"}`),
    ["run.started@1", "run.completed@1", "run.started@2", "run.completed@2"],
  );
});

test("an unusable token file is reported once to the user and the channel stays off", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-sink-ext-bad-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, "empty.token");
  writeFileSync(tokenFile, "\n");
  const { pi, listener } = await setup(t, { ANON_NOTIFY_SINK_TOKEN_FILE: tokenFile });
  pi.script([ai.fauxAssistantMessage("still works")]);
  await pi.prompt("hi");
  const warnings = pi.notices().filter((text) => text.includes("桌面通道"));
  assert.equal(warnings.length, 1);
  assert.match(warnings[0]!, /empty\.token/);
  assert.equal(listener.connections, 0);
  assert.equal(pi.session.state.messages.at(-1)?.role, "assistant");
});
