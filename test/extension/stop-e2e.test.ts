/**
 * `stop` end to end with real parts: the operator API of the real notify-webhook plugin (Koishi,
 * SQLite), the control lane of the extension as Pi loads it, and a real Pi session (SDK + faux
 * model) whose run is aborted like Esc: a running `bash` tool (its processes killed), streaming, a
 * retry wait; idle and offline sessions get their plain answers.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { CommandSummary } from "../../protocol/queue.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { ai, latch, makeRoot, startPi, waitForAbortStep, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";
import { settled } from "../../harness/session-commands.ts";
import { OPERATOR_TOKEN, operatorApi } from "../../harness/agent-api.ts";
import { extensionEnv, RECIPIENT } from "../../harness/extension-env.ts";
import { waitUntil } from "../../harness/wait.ts";

type Operator = ReturnType<typeof operatorApi>;

async function setup(t: TestContext, settings?: StartPiOptions["settings"]) {
  const koishi = await startKoishi({ config: { operatorToken: OPERATOR_TOKEN, recipientId: RECIPIENT.qq } });
  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, extensionEnv(koishi, root));
  let pi: PiHarness | undefined;
  t.after(async () => {
    await pi?.dispose({ keepRoot: true }).catch(() => undefined);
    await koishi.stop();
    process.env = saved;
    rmSync(root, { recursive: true, force: true });
  });
  pi = await startPi({ root, ...(settings ? { settings } : {}) });
  await pi.prompt("/anon-notify");
  const operator = operatorApi(koishi);
  const sessionId = pi.session.sessionManager.getSessionId();
  await waitUntil(async () => ((await operator.sessions()).body.sessions.length === 1 ? true : undefined), "the session is online", 20_000);
  return { pi, operator, sessionId, root };
}

/** Requests a stop and waits (bounded) until the extension's ACK outcome is on the command. */
async function stopAndAwaitOutcome(operator: Operator, sessionId: string): Promise<CommandSummary> {
  const requested = await operator.stop(sessionId);
  assert.equal(requested.status, 202, JSON.stringify(requested.body));
  const id = requested.body.command.command_id as string;
  return waitUntil(async () => {
    const found = ((await operator.list(sessionId)).body.commands as CommandSummary[]).find((c) => c.command_id === id);
    return found?.state === "accepted" ? found : undefined;
  }, `stop ${id} ACKed`);
}

/** Event kinds the server accepted for this session, oldest first. */
async function acceptedStatuses(operator: Operator, sessionId: string): Promise<string[]> {
  const { entries } = (await operator.audit({ session_id: sessionId, limit: "200" })).body as {
    entries: { action: string; data: { event: { status: string } } }[];
  };
  return entries
    .filter((e) => e.action === "event.accepted")
    .map((e) => e.data.event.status)
    .reverse();
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

test("a stop during a running bash tool kills its processes, ends the run silently and is ACKed stopped", { timeout: 90_000 }, async (t) => {
  const { pi, operator, sessionId, root } = await setup(t);
  const pidFile = join(root, "sleep.pid");
  const marker = join(root, "finished");
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: `sleep 60 & echo $! > '${pidFile}'; wait; echo done > '${marker}'` })], {
      stopReason: "toolUse",
    }),
    ai.fauxAssistantMessage("这句不应出现"),
  ]);
  const done = settled(pi);
  const run = pi.prompt("跑一个很久的命令");
  const pid = await waitUntil(
    () => (existsSync(pidFile) && readFileSync(pidFile, "utf8").trim() ? Number(readFileSync(pidFile, "utf8")) : undefined),
    "the bash tool started its sleep",
    30_000,
  );
  assert.ok(alive(pid));

  const stopped = await stopAndAwaitOutcome(operator, sessionId);
  assert.deepEqual([stopped.kind, stopped.outcome], ["stop", "stopped"]);
  await run;
  await done;
  await waitUntil(() => !alive(pid), `the sleep ${pid} started by bash was killed`);
  assert.equal(existsSync(marker), false, "the command never ran to its end");
  assert.equal(pi.modelCalls.length, 1, "the run ended with the tool: no further model call");

  // Silent: the next, normal run's completion is the first notice this session ever sent.
  pi.script([ai.fauxAssistantMessage("好的，已停止后继续。")]);
  await pi.prompt("继续");
  const statuses = await waitUntil(async () => {
    const seen = await acceptedStatuses(operator, sessionId);
    return seen.length > 0 ? seen : undefined;
  }, "the next run's completion notice");
  assert.deepEqual(statuses, ["completed"], "no notice for the stopped run");
});

test("a stop reaches a streaming model and a retry wait alike, each ACKed stopped", { timeout: 90_000 }, async (t) => {
  // A retry wait far longer than the test: only the stop can end it.
  const { pi, operator, sessionId } = await setup(t, { retry: { enabled: true, maxRetries: 3, baseDelayMs: 600_000 } });
  const modelStarted = latch();
  pi.script([waitForAbortStep(modelStarted.signal)]);
  let done = settled(pi);
  const streaming = pi.prompt("写一篇长文");
  await modelStarted.promise;
  assert.equal((await stopAndAwaitOutcome(operator, sessionId)).outcome, "stopped");
  await streaming;
  await done;
  const last = pi.session.sessionManager.getBranch().at(-1)!;
  assert.equal(last.type === "message" && last.message.role === "assistant" && last.message.stopReason, "aborted");

  const retrying = latch();
  const off = pi.session.subscribe((event) => {
    if (event.type === "auto_retry_start") retrying.signal();
  });
  t.after(off);
  pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "503 overloaded" })]);
  done = settled(pi);
  const failing = pi.prompt("再试一次");
  await retrying.promise;
  assert.equal((await stopAndAwaitOutcome(operator, sessionId)).outcome, "stopped");
  await failing;
  await done;
  assert.ok(pi.session.isIdle);
});

test("a stop to an idle session is ACKed already_idle; to a session switched off it is refused as offline", { timeout: 60_000 }, async (t) => {
  const { pi, operator, sessionId } = await setup(t);
  const idle = await stopAndAwaitOutcome(operator, sessionId);
  assert.deepEqual([idle.outcome, idle.state], ["already_idle", "accepted"]);
  assert.equal(pi.modelCalls.length, 0);

  await pi.prompt("/anon-notify");
  await waitUntil(async () => ((await operator.sessions()).body.sessions.length === 0 ? true : undefined), "offline");
  assert.deepEqual(await operator.stop(sessionId), { status: 409, body: { error: "session_offline" } });
});
