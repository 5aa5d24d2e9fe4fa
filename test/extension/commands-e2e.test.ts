/**
 * The whole loop with real parts: the extension as Pi loads it from the package root, in a REAL Pi
 * session (SDK + faux model), switched on with `/anon-notify`, talking to the REAL notify-webhook
 * plugin in a Koishi app (loopback port, SQLite), with instructions sent through the operator API.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import { dataDirFor } from "../../extension/config/config.ts";
import { SUBAGENT_FLAG } from "../../activation.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { ai, latch, makeRoot, startPi, waitForAbortStep, type PiHarness } from "../../harness/pi.ts";
import { commandMessages, gatedTool, settled } from "../../harness/session-commands.ts";
import { OPERATOR_TOKEN, call, operatorApi } from "../../harness/agent-api.ts";
import { imageOf } from "../server/images.ts";
import { waitUntil } from "../../harness/wait.ts";

const RECIPIENT = { qq: "10001", anonQq: "10002" };

/** Environment for the extension; restored after the test. */
function configure(t: TestContext, koishi: KoishiHarness, root: string) {
  const saved = { ...process.env };
  Object.assign(process.env, {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: koishi.token,
    ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
    ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
  });
  t.after(() => {
    process.env = saved;
  });
}

async function setup(t: TestContext, options: { commandLeaseMs?: number; tools?: ToolDefinition[] } = {}) {
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, recipientId: RECIPIENT.qq, ...(options.commandLeaseMs ? { commandLeaseMs: options.commandLeaseMs } : {}) },
  });
  const root = makeRoot();
  configure(t, koishi, root);
  const harnesses: PiHarness[] = [];
  t.after(async () => {
    for (const pi of harnesses.reverse()) await pi.dispose({ keepRoot: true }).catch(() => undefined);
    await koishi.stop();
    rmSync(root, { recursive: true, force: true });
  });
  const open = async (sessionFile?: string, flags?: Record<string, boolean>) => {
    const pi = await startPi({ root, tools: options.tools ?? [], ...(sessionFile ? { sessionFile } : {}), ...(flags ? { flags } : {}) });
    harnesses.push(pi);
    return pi;
  };
  const pi = await open();
  await pi.prompt("/anon-notify");
  const operator = operatorApi(koishi);
  const sessionId = pi.session.sessionManager.getSessionId();
  await online(operator, sessionId);
  const journalFile = join(dataDirFor(join(root, "agent")), "commands.jsonl");
  return { koishi, pi, operator, sessionId, root, journalFile, open };
}

type Operator = ReturnType<typeof operatorApi>;

/** A runtime re-registers within one heartbeat interval (10 s by default), hence the generous bound. */
async function online(operator: Operator, sessionId: string) {
  return waitUntil(
    async () => {
      const { body } = await operator.sessions();
      return body.sessions.find((s: { session_id: string }) => s.session_id === sessionId);
    },
    `session ${sessionId} online`,
    60_000,
  );
}

async function commandState(operator: Operator, sessionId: string, commandId: string): Promise<string> {
  const { body } = await operator.list(sessionId);
  return body.commands.find((c: { command_id: string }) => c.command_id === commandId)?.state;
}

function untilState(operator: Operator, sessionId: string, commandId: string, state: string) {
  return waitUntil(async () => ((await commandState(operator, sessionId, commandId)) === state ? true : undefined), `${commandId} ${state}`, 60_000);
}

function deliveredIds(pi: PiHarness): string[] {
  return commandMessages(pi).map((m) => m.details.command_id);
}

test("an activated session is listed online, answers an operator instruction while idle, and goes offline when switched off", {
  timeout: 60_000,
}, async (t) => {
  const { pi, operator, sessionId, journalFile } = await setup(t);
  const listed = await online(operator, sessionId);
  assert.deepEqual(
    { project: listed.project, state: listed.state, supports_images: listed.supports_images, model: listed.model },
    { project: "work", state: "idle", supports_images: true, model: "faux/faux-1" },
  );

  pi.script([ai.fauxAssistantMessage("测试已经全部通过。")]);
  const done = settled(pi);
  const created = await operator.create({ session_id: sessionId, instruction: "请跑一遍测试并告诉我结果" });
  assert.equal(created.status, 201);
  const commandId = created.body.command.command_id as string;
  await done;
  await untilState(operator, sessionId, commandId, "accepted");

  assert.deepEqual(deliveredIds(pi), [commandId]);
  const seen = pi.modelCalls[0]!.messages.at(-1)!;
  assert.equal(seen.role, "user");
  assert.deepEqual(seen.content, [{ type: "text", text: "请跑一遍测试并告诉我结果" }]);
  const entry = pi.session.sessionManager.getEntries().find((e) => e.type === "custom_message");
  assert.equal((entry as { content: unknown }).content, "请跑一遍测试并告诉我结果", "stored as the plain instruction string");
  assert.ok(readFileSync(journalFile, "utf8").includes(commandId));
  assert.equal((await operator.cancel(commandId, sessionId)).body.error, "already_accepted");

  await pi.prompt("/anon-notify");
  await waitUntil(async () => ((await operator.sessions()).body.sessions.length === 0 ? true : undefined), "offline");
  const refused = await operator.create({ session_id: sessionId, instruction: "离线了还能收到吗" });
  assert.deepEqual([refused.status, refused.body.error], [409, "session_offline"], "an offline session is refused, not queued");
});

test("a busy session takes instructions in order at turn boundaries; one cancelled before its claim never arrives", { timeout: 60_000 }, async (t) => {
  const slow = gatedTool("slow");
  const { pi, operator, sessionId } = await setup(t, { tools: [slow.tool] });
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ...Array.from({ length: 4 }, () => ai.fauxAssistantMessage("已处理")),
  ]);
  const run = pi.prompt("开始一个长任务");
  await slow.started;
  // An idle session's claim is held open until the server records the run's first "running" beat.
  await waitUntil(
    async () =>
      (await operator.sessions()).body.sessions.find((s: { session_id: string; state: string }) => s.session_id === sessionId && s.state === "running"),
    `session ${sessionId} seen running`,
    60_000,
  );
  const ids: string[] = [];
  for (const instruction of ["第一条", "第二条（将撤回）", "第三条"]) {
    const created = await operator.create({ session_id: sessionId, instruction });
    assert.equal(created.status, 201);
    ids.push(created.body.command.command_id);
  }
  const [first, cancelled, third] = ids as [string, string, string];
  // Nothing is claimed while the tool runs, so all three are still cancellable.
  const listed = (await operator.list(sessionId)).body.commands as { command_id: string; cancellable: boolean }[];
  assert.deepEqual(
    listed.map((c) => c.cancellable),
    [true, true, true],
  );
  assert.deepEqual((await operator.cancel(cancelled, sessionId)).body, { state: "cancelled" });
  slow.release();
  await run;
  await untilState(operator, sessionId, third, "accepted");
  await pi.session.waitForIdle();

  assert.equal(await commandState(operator, sessionId, first), "accepted");
  assert.equal(await commandState(operator, sessionId, cancelled), "cancelled");
  assert.deepEqual(deliveredIds(pi), [first, third]);
  const texts = pi.modelCalls.flatMap((call) => call.messages.filter((m) => m.role === "user").map((m) => JSON.stringify(m.content)));
  assert.equal(
    texts.some((text) => text.includes("将撤回")),
    false,
    "the cancelled instruction never reached the model",
  );
});

test("an instruction whose lease expires unconfirmed, across a server restart and a Pi restart, is in the session exactly once", {
  timeout: 90_000,
}, async (t) => {
  const { koishi, pi, operator, sessionId, journalFile, open } = await setup(t, { commandLeaseMs: 400 });
  // The journal cannot be written (its path is a folder), so the first runtime can never ACK.
  mkdirSync(journalFile, { recursive: true });
  pi.script([ai.fauxAssistantMessage("好的，只做一次。")]);
  const done = settled(pi);
  const commandId = (await operator.create({ session_id: sessionId, instruction: "只执行一次" })).body.command.command_id as string;
  await done;
  await waitUntil(() => (pi.notices().some((n) => n.includes("写入指令日志失败")) ? true : undefined), "journal failure reported");
  assert.notEqual(await commandState(operator, sessionId, commandId), "accepted");

  // The server restarts mid-lease; the runtime registers again and is handed the expired lease again.
  await koishi.restart();
  await online(operator, sessionId);
  assert.notEqual(await commandState(operator, sessionId, commandId), "accepted");
  assert.deepEqual(deliveredIds(pi), [commandId]);

  // Pi restarts on the same session with a working journal: the redelivery is only ACKed.
  const sessionFile = pi.sessionFile()!;
  await pi.dispose({ keepRoot: true });
  rmSync(journalFile, { recursive: true, force: true });
  const again = await open(sessionFile);
  await untilState(operator, sessionId, commandId, "accepted");
  assert.deepEqual(deliveredIds(again), [commandId], "still one copy in the session");
  assert.equal(again.modelCalls.length, 0, "the restarted session did not run it again");
  assert.ok(existsSync(journalFile) && readFileSync(journalFile, "utf8").includes(commandId));
});

test("an image instruction reaches the model as an image block", { timeout: 60_000 }, async (t) => {
  const { pi, operator, sessionId } = await setup(t);
  const image = imageOf("image/png", 64);
  pi.script([ai.fauxAssistantMessage("看到了")]);
  const done = settled(pi);
  const created = await operator.create({ session_id: sessionId, instruction: "看看这张图", images: [image] });
  assert.equal(created.status, 201);
  await done;
  assert.deepEqual(pi.modelCalls[0]!.messages.at(-1)!.content, [
    { type: "text", text: "看看这张图" },
    { type: "image", data: image.data, mimeType: "image/png" },
  ]);
});

test("an instruction interrupted before any reply is accepted once and reported to the user as the operator's and, as a warning event, to the server", {
  timeout: 60_000,
}, async (t) => {
  const { koishi, pi, operator, sessionId } = await setup(t);
  const modelStarted = latch();
  pi.script([waitForAbortStep(modelStarted.signal)]);
  const done = settled(pi);
  const commandId = (await operator.create({ session_id: sessionId, instruction: "整理日志" })).body.command.command_id as string;
  await modelStarted.promise;
  await pi.session.abort();
  await done;
  await untilState(operator, sessionId, commandId, "accepted");
  const warning = pi.notices().find((n) => n.includes("被中断") && n.includes("整理日志"));
  assert.ok(warning?.startsWith("操作员的指令"), `the warning names who sent it: ${warning}`);
  const eventId = `ext:${sessionId}:cmd-interrupted:${commandId}`;
  const receipt = await waitUntil(async () => {
    const answer = await call(koishi, "GET", `/events/${encodeURIComponent(eventId)}`);
    return answer.status === 200 ? answer.body : undefined;
  }, "warning event received");
  assert.equal(receipt.status, "warning");
  assert.deepEqual(deliveredIds(pi), [commandId]);
});

test("a session whose model cannot see images declares it, is refused image instructions, and still takes text", { timeout: 60_000 }, async (t) => {
  const { pi, operator, sessionId } = await setup(t);
  const textOnly = { ...pi.faux.getModel(), id: "faux-text", name: "faux text only", input: ["text" as const] };
  await pi.session.setModel(textOnly);
  await waitUntil(async () => {
    const listed = await online(operator, sessionId);
    return listed.model === "faux/faux-text" && listed.supports_images === false ? true : undefined;
  }, "text-only model announced");

  const refused = await operator.create({ session_id: sessionId, instruction: "看看这张图", images: [imageOf("image/png", 64)] });
  assert.deepEqual([refused.status, refused.body.error], [409, "images_not_supported"]);
  pi.script([ai.fauxAssistantMessage("收到")]);
  const done = settled(pi);
  const created = await operator.create({ session_id: sessionId, instruction: "那就用文字描述吧" });
  assert.equal(created.status, 201);
  await done;
  assert.deepEqual(deliveredIds(pi), [created.body.command.command_id]);
});

test("a subagent restoring an active session never heartbeats, so it can never be sent an instruction", { timeout: 60_000 }, async (t) => {
  const { pi, operator, sessionId, open } = await setup(t);
  pi.script([ai.fauxAssistantMessage("主会话的回答")]);
  await pi.prompt("先说一句话，让会话文件落盘");
  const sessionFile = pi.sessionFile()!;
  await pi.dispose({ keepRoot: true });
  await waitUntil(async () => ((await operator.sessions()).body.sessions.length === 0 ? true : undefined), "the main runtime went offline");

  const sub = await open(sessionFile, { [SUBAGENT_FLAG]: true });
  sub.script([ai.fauxAssistantMessage("子 Agent 的回答")]);
  await sub.prompt("子任务");
  // Its settle would have sent a heartbeat had the services started; ask the server after it.
  assert.deepEqual((await operator.sessions()).body.sessions, []);
  assert.equal((await operator.create({ session_id: sessionId, instruction: "子 Agent 收不到" })).body.error, "session_offline");
});

test("after /reload the session is online under the new runtime and still takes instructions", { timeout: 60_000 }, async (t) => {
  const { pi, operator, sessionId } = await setup(t);
  await pi.session.reload();
  await online(operator, sessionId);
  pi.script([ai.fauxAssistantMessage("重载后也收到了")]);
  const done = settled(pi);
  const created = await operator.create({ session_id: sessionId, instruction: "重载后还在吗" });
  assert.equal(created.status, 201);
  await done;
  await untilState(operator, sessionId, created.body.command.command_id, "accepted");
  assert.deepEqual(deliveredIds(pi), [created.body.command.command_id]);
  assert.equal((await operator.sessions()).body.sessions.length, 1, "the old runtime's offline did not remove the new one");
});
