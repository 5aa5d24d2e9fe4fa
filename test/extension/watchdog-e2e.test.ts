/**
 * The outside watchdog end to end: the extension as Pi loads it, in REAL Pi sessions (in-process
 * and in a child process), heartbeating to the REAL notify-webhook plugin (loopback, SQLite) with a
 * YesImBot v3 stand-in as the persona. Thresholds are small; every wait is for a condition.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { AuditPage, type AuditEntry } from "../../protocol/audit.ts";
import { RECIPIENT, extensionEnv, writeUserConfig } from "../../harness/extension-env.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { EXTENSION_ROOT, ai, latch, makeRoot, startPi, type PiHarness } from "../../harness/pi.ts";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { withPersona, worldState } from "../server/persona-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

/** A bound well past a heartbeat TTL of a few seconds, on a busy machine. */
const PATIENCE = 60_000;

async function setup(t: TestContext) {
  const koishi = await startKoishi({
    config: {
      operatorToken: OPERATOR_TOKEN,
      botId: "mock:514",
      recipientId: RECIPIENT.qq,
      injectRetryDelayMs: 10,
      sessionHeartbeatTimeoutMs: 3_000,
      watchdogStallAfterMs: 1_000,
      watchdogCheckIntervalMs: 100,
    },
    plugins: withPersona,
  });
  const saved = { ...process.env };
  const roots: string[] = [];
  t.after(async () => {
    process.env = saved;
    await koishi.stop();
    for (const root of roots) rmSync(root, { recursive: true, force: true });
  });
  /** A root whose agent folder holds a config with one-second heartbeats. */
  const root = () => {
    const made = makeRoot();
    roots.push(made);
    writeUserConfig(made, { presence: { heartbeatIntervalMs: 1_000 } });
    return made;
  };
  const env = (agentRoot: string) => extensionEnv(koishi, agentRoot);
  return { koishi, root, env };
}

async function audit(koishi: KoishiHarness, sessionId: string): Promise<AuditEntry[]> {
  const answer = await call(koishi, "GET", `/operator/audit?session_id=${sessionId}&limit=200`, undefined, OPERATOR_TOKEN);
  return AuditPage.parse(answer.body).entries;
}

function untilAudited(koishi: KoishiHarness, sessionId: string, action: string): Promise<AuditEntry> {
  return waitUntil(async () => (await audit(koishi, sessionId)).find((e) => e.action === action), `${action} for ${sessionId}`, PATIENCE);
}

function untilState(koishi: KoishiHarness, sessionId: string, state: "idle" | "running") {
  return waitUntil(
    async () => {
      const { body } = await call(koishi, "GET", "/operator/sessions", undefined, OPERATOR_TOKEN);
      return body.sessions.find((s: { session_id: string; state: string }) => s.session_id === sessionId && s.state === state);
    },
    `${sessionId} ${state}`,
    PATIENCE,
  );
}

function personaTexts(koishi: KoishiHarness, marker: string): string[] {
  return worldState(koishi)
    .recorded.map((r) => r.message)
    .filter((m) => m.includes(marker));
}

test("a real command that hangs gets exactly one stall notice, naming the tool, and the episode clears when it ends", { timeout: 90_000 }, async (t) => {
  const { koishi, root, env } = await setup(t);
  const piRoot = root();
  Object.assign(process.env, env(piRoot));
  const pi = await startPi({ root: piRoot });
  t.after(() => pi.dispose({ keepRoot: true }));
  await pi.prompt("/anon-notify");
  const sessionId = pi.session.sessionManager.getSessionId();

  const release = join(piRoot, "release");
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: `while [ ! -f '${release}' ]; do sleep 0.05; done; echo released` })], {
      stopReason: "toolUse",
    }),
    ai.fauxAssistantMessage("命令结束了。"),
  ]);
  const running = pi.prompt("等一个会卡住的命令");
  const stalled = await untilAudited(koishi, sessionId, "watchdog.stalled");
  assert.equal(stalled.actor, "watchdog");
  assert.equal(stalled.data.activity, "bash");
  const told = await waitUntil(() => personaTexts(koishi, "可能卡住")[0], "stall notice reached the persona", PATIENCE);
  assert.match(told, /正在执行工具 bash/);
  assert.doesNotMatch(told, /released/, "never the tool's output");

  writeFileSync(release, "");
  await running;
  const cleared = await untilAudited(koishi, sessionId, "watchdog.stalled_cleared");
  assert.match(String(cleared.data.reason), /^(activity_resumed|idle)$/);
  await untilState(koishi, sessionId, "idle");

  const rows = await audit(koishi, sessionId);
  assert.equal(rows.filter((e) => e.action === "watchdog.stalled").length, 1, "one notice for the episode");
  assert.equal(personaTexts(koishi, "可能卡住").length, 1);
  const accepted = rows.find((e) => e.action === "event.accepted" && e.subject === stalled.subject);
  assert.equal(accepted?.actor, "watchdog", "the notice went through the event intake like any event");
});

test("a killed Pi process gets exactly one vanish notice; a session shut down cleanly at the same time gets none", { timeout: 90_000 }, async (t) => {
  const { koishi, root, env } = await setup(t);

  // The clean one: in this process, running a tool when it is shut down.
  const cleanRoot = root();
  Object.assign(process.env, env(cleanRoot));
  const gate = latch();
  const started = latch();
  const waiting: ToolDefinition = {
    name: "wait_here",
    label: "wait_here",
    description: "Waits for the test.",
    parameters: Type.Object({}),
    async execute() {
      started.signal();
      await gate.promise;
      return { content: [{ type: "text", text: "ok" }], details: undefined };
    },
  };
  const clean: PiHarness = await startPi({ root: cleanRoot, tools: [waiting] });
  await clean.prompt("/anon-notify");
  const cleanId = clean.session.sessionManager.getSessionId();
  clean.script([ai.fauxAssistantMessage([ai.fauxToolCall("wait_here", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("好")]);
  const cleanRun = clean.prompt("等着");
  await started.promise;
  await untilState(koishi, cleanId, "running");

  // The killed one: a Pi process of its own.
  const childRoot = root();
  const child = spawn(join(EXTENSION_ROOT, "node_modules/.bin/node"), [join(EXTENSION_ROOT, "test/helpers/pi-child.ts")], {
    env: { ...process.env, ...env(childRoot), PI_CHILD_ROOT: childRoot },
    stdio: ["ignore", "pipe", "inherit"],
  });
  const exited = new Promise((resolve) => child.once("exit", resolve));
  t.after(async () => {
    child.kill("SIGKILL");
    await exited;
  });
  await new Promise<void>((resolve, reject) => {
    child.stdout!.on("data", (chunk: Buffer) => chunk.toString().includes("RUNNING") && resolve());
    child.once("exit", (code) => reject(new Error(`child exited early (${code})`)));
  });
  const childSession = await waitUntil(
    async () => {
      const { body } = await call(koishi, "GET", "/operator/sessions", undefined, OPERATOR_TOKEN);
      return body.sessions.find((s: { session_id: string; state: string }) => s.session_id !== cleanId && s.state === "running");
    },
    "the child session running",
    PATIENCE,
  );
  const childId: string = childSession.session_id;

  // Clean shutdown first (session_shutdown sends the offline call), then the kill.
  // Pi 1.6.0 waits for the running tool before it shuts down, so the gate opens once shutdown has begun.
  const disposed = clean.dispose({ keepRoot: true });
  gate.signal();
  await disposed;
  await cleanRun.catch(() => undefined);
  child.kill("SIGKILL");
  await exited;

  const vanished = await untilAudited(koishi, childId, "watchdog.vanished");
  assert.equal(vanished.actor, "watchdog");
  assert.equal(vanished.data.activity, "hang");
  const told = await waitUntil(() => personaTexts(koishi, "运行中失联")[0], "vanish notice reached the persona", PATIENCE);
  assert.match(told, /正在执行工具 hang/);

  // By now both entries have expired (the clean one stopped heartbeating first): only the kill counts.
  assert.equal((await audit(koishi, childId)).filter((e) => e.action === "watchdog.vanished").length, 1);
  assert.equal(personaTexts(koishi, "运行中失联").length, 1);
  // (It may well have been reported as stalled while it waited: that is a different episode.)
  assert.deepEqual(
    (await audit(koishi, cleanId)).filter((e) => e.action === "watchdog.vanished"),
    [],
  );
});
