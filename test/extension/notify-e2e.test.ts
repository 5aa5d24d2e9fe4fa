/**
 * Lifecycle notices end to end: a REAL Pi runtime (SDK + faux model) with this extension, sending
 * to a real webhook on loopback. Silence is proven with a control run afterwards: notices leave in
 * order, so when the control's notice is the first to arrive, nothing was sent before it.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { Type } from "typebox";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import {
  ai,
  echoTool,
  failingTool,
  latch,
  makeRoot,
  startPi,
  terminatingTool,
  waitForAbortStep,
  type PiHarness,
  type StartPiOptions,
} from "../../harness/pi.ts";
import { ABORT_SCENARIOS } from "../helpers/abort-scenarios.ts";
import { probe, type Probe } from "../helpers/probe.ts";
import { finalEventId } from "../../extension/notices/notice-rules.ts";
import { TEST_TOKEN, configureExtension, startWebhook, type Webhook } from "../../harness/webhook.ts";

interface Setup {
  pi: PiHarness;
  webhook: Webhook;
  probe: Probe;
}

async function setup(t: TestContext, options: StartPiOptions = {}, configOverrides: Record<string, unknown> = {}): Promise<Setup> {
  const webhook = await startWebhook();
  const root = makeRoot();
  configureExtension(root, webhook.endpoint, configOverrides);
  const observer = probe();
  const pi = await startPi({ root, ...options, extensions: [observer.extension, ...(options.extensions ?? [])] });
  t.after(async () => {
    await pi.dispose({ keepRoot: true }).catch(() => undefined);
    await webhook.close();
    rmSync(root, { recursive: true, force: true });
  });
  return { pi, webhook, probe: observer };
}

const text = (reply: string) => ai.fauxAssistantMessage(reply);
/** A final notice's details without the run's start time, which every run the extension saw begin carries. */
const withoutStart = (details: Record<string, unknown> | null) => {
  const { run_started_at: startedAt, ...rest } = details ?? {};
  assert.equal(typeof startedAt, "string", "the run's start time");
  return rest;
};
const toolCall = (...names: string[]) =>
  ai.fauxAssistantMessage(
    names.map((name) => ai.fauxToolCall(name, {})),
    { stopReason: "toolUse" },
  );

/** Runs a normal reply and returns the first notice the webhook got, asserting it is the control's. */
async function control({ pi, webhook }: Setup) {
  pi.faux.setResponses([]);
  pi.script([text("control done")]);
  await pi.prompt("control");
  const [first] = await webhook.waitForEvents(1);
  assert.equal(first?.body.task, "control", "a notice was sent before the control run's");
  assert.equal(webhook.events.length, 1);
}

test("an inactive session sends nothing; once enabled, a completed run sends one complete notice", async (t) => {
  const s = await setup(t);
  s.pi.script([text("not reported")]);
  await s.pi.prompt("while inactive");
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("全部完成。")]);
  const before = new Date().toISOString();
  await s.pi.prompt("build the index");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(s.webhook.events.length, 1);
  const sessionId = s.pi.session.sessionManager.getSessionId();
  const body = event!.body;
  assert.match(body.event_id, new RegExp(`^pi:${sessionId}:[0-9a-f]+:completed$`));
  assert.equal(event!.idempotencyKey, body.event_id);
  assert.equal(event!.authorization, `Bearer ${TEST_TOKEN}`);
  assert.equal(body.session_id, sessionId);
  assert.equal(body.status, "completed");
  assert.equal(body.task, "build the index");
  assert.equal(body.summary, "项目 work：全部完成。");
  assert.equal(body.source, "Pi Agent · work");
  const { run_started_at: startedAt, ...details } = body.details as Record<string, unknown>;
  // The said line points at the reply, the agent's words after "项目 work：".
  assert.deepEqual(details, { stop_reason: "stop", said: { key: "run_completed", params: { project: "work", reply_from: 8 } } });
  assert.ok(typeof startedAt === "string" && startedAt >= before && startedAt <= body.created_at, `the run's start: ${String(startedAt)}`);
  assert.equal(body.delivery, "anon");
  const usage = s.pi.session.getContextUsage();
  assert.ok(body.context_usage && usage, "context usage is sampled");
  assert.equal(body.context_usage.context_window, usage.contextWindow);
});

test("switching off stops notices again", async (t) => {
  const s = await setup(t);
  await s.pi.prompt("/anon-notify");
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("not reported")]);
  await s.pi.prompt("while off");
  await s.pi.prompt("/anon-notify");
  await control(s);
});

test("an inactive session runs none of the extension's per-message handlers; switching on attaches them, off detaches them", async (t) => {
  const webhook = await startWebhook();
  const root = makeRoot();
  configureExtension(root, webhook.endpoint);
  // No probe: only this extension's handlers are counted.
  const pi = await startPi({ root });
  t.after(async () => {
    await pi.dispose({ keepRoot: true }).catch(() => undefined);
    await webhook.close();
    rmSync(root, { recursive: true, force: true });
  });
  const perMessage = ["message_update", "message_end", "agent_end"] as const;
  const listening = () => perMessage.filter((event) => pi.session.hasExtensionHandlers(event));
  pi.script([text("inactive run")]);
  await pi.prompt("while inactive");
  assert.deepEqual(listening(), [], "inactive: nothing runs per message");
  await pi.prompt("/anon-notify");
  assert.deepEqual(listening(), [...perMessage], "active: the recorder, presence and the command channel listen");
  await pi.prompt("/anon-notify");
  pi.script([text("switched off again")]);
  await pi.prompt("after switching off");
  assert.deepEqual(listening(), [], "switched off: detached again");
});

test("a session switched on while a run is in progress reports that run's completion", async (t) => {
  const running = latch();
  const release = latch();
  const gated: ToolDefinition = {
    name: "gated",
    label: "gated",
    description: "Runs until released.",
    parameters: Type.Object({}),
    execute: async () => {
      running.signal();
      await release.promise;
      return { content: [{ type: "text", text: "released" }], details: undefined };
    },
  };
  const s = await setup(t, { tools: [gated] });
  s.pi.script([toolCall("gated"), text("finished after enabling")]);
  const run = s.pi.prompt("long job");
  await running.promise;
  await s.pi.prompt("/anon-notify");
  release.signal();
  await run;
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(event!.body.task, "long job");
  assert.equal(event!.body.status, "completed");
  assert.deepEqual(
    event!.body.details,
    { stop_reason: "stop", said: { key: "run_completed", params: { project: "work", reply_from: 8 } } },
    "no start time: the run began before the extension joined it",
  );
});

test("a model error after retries is one failed notice with the error", async (t) => {
  const s = await setup(t);
  await s.pi.prompt("/anon-notify");
  s.pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "401 invalid api key" })]);
  await s.pi.prompt("call the model");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(event!.body.status, "failed");
  assert.match(event!.body.summary, /模型请求出错：401 invalid api key/);
  assert.deepEqual(withoutStart(event!.body.details), {
    stop_reason: "error",
    failure_reason: "error",
    said: { key: "run_failed", params: { project: "work", reason: "error", error: "401 invalid api key" } },
  });
});

test("a final length stop is failed", async (t) => {
  const s = await setup(t, { settings: { compaction: { enabled: false } } });
  await s.pi.prompt("/anon-notify");
  s.pi.script([ai.fauxAssistantMessage("cut off mid", { stopReason: "length" })]);
  await s.pi.prompt("write a lot");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(event!.body.status, "failed");
  assert.deepEqual(withoutStart(event!.body.details), {
    stop_reason: "length",
    failure_reason: "length",
    said: { key: "run_failed", params: { project: "work", reason: "length", reply_from: 22 } },
  });
  assert.equal(Array.from(event!.body.summary).slice(22).join(""), "cut off mid", "the reply, after the extension's words");
});

test("a final tool batch in which every result terminates is completed", async (t) => {
  const s = await setup(t, { tools: [terminatingTool("finish"), terminatingTool("finish_too")] });
  await s.pi.prompt("/anon-notify");
  s.pi.script([toolCall("finish", "finish_too")]);
  await s.pi.prompt("finish it");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(s.pi.modelCalls.length, 1, "Pi made no model call after the terminating batch");
  assert.equal(event!.body.status, "completed");
  assert.deepEqual(withoutStart(event!.body.details), { stop_reason: "toolUse", said: { key: "run_completed", params: { project: "work" } } });
});

test("a final tool batch that terminates with an error result is failed", async (t) => {
  const s = await setup(t, {
    tools: [terminatingTool("finish")],
    extensions: [
      (pi) => {
        // A policy extension blocking the call and asking Pi to stop there.
        pi.on("tool_call", () => ({ block: true, reason: "blocked by policy", terminate: true }));
      },
    ],
  });
  await s.pi.prompt("/anon-notify");
  s.pi.script([toolCall("finish")]);
  await s.pi.prompt("finish it");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(event!.body.status, "failed");
  assert.deepEqual(withoutStart(event!.body.details), {
    stop_reason: "toolUse",
    failure_reason: "tool_error_in_final_batch",
    said: { key: "run_failed", params: { project: "work", reason: "tool_error_in_final_batch" } },
  });
});

test("a run that continued past a non-terminating batch is judged by its last reply", async (t) => {
  const s = await setup(t, { tools: [terminatingTool("finish"), echoTool()] });
  await s.pi.prompt("/anon-notify");
  s.pi.script([toolCall("finish", "echo"), text("after the batch")]);
  await s.pi.prompt("mixed batch");
  const [event] = await s.webhook.waitForEvents(1);
  assert.equal(s.pi.modelCalls.length, 2, "one non-terminating result keeps the run going");
  assert.equal(event!.body.status, "completed");
  assert.match(event!.body.summary, /after the batch/);
  // The id names the entry that persisted the last reply, so a resend after a crash is the same event.
  const replies = s.pi.session.sessionManager.getBranch().filter((e) => e.type === "message" && e.message.role === "assistant");
  assert.equal(event!.body.event_id, finalEventId(s.pi.session.sessionManager.getSessionId(), replies.at(-1)!.id, "completed"));
});

for (const scenario of ABORT_SCENARIOS) {
  test(`an interrupt ${scenario.name} is silent`, async (t) => {
    const { pi, interrupt } = scenario.prepare();
    const s = await setup(t, pi);
    await s.pi.prompt("/anon-notify");
    await interrupt(s.pi);
    await control(s);
  });
}

test("session replacement and reload send nothing", async (t) => {
  const s = await setup(t);
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("one")]);
  await s.pi.prompt("first");
  await s.webhook.waitForEvents(1);
  const file = s.pi.sessionFile()!;
  await s.pi.session.reload();
  const leaf = s.pi.session.sessionManager.getLeafId()!;
  await s.pi.runtime.fork(leaf, { position: "at" });
  await s.pi.runtime.newSession();
  await s.pi.runtime.switchSession(file);
  assert.equal(s.probe.last()?.status, "active", "back in the enabled session");
  s.pi.script([text("control done")]);
  await s.pi.prompt("control");
  const events = await s.webhook.waitForEvents(2);
  assert.deepEqual(
    events.map((e) => e.body.task),
    ["first", "control"],
  );
});

test("quitting while a run streams sends nothing", async (t) => {
  const s = await setup(t);
  await s.pi.prompt("/anon-notify");
  const streaming = latch();
  s.pi.script([waitForAbortStep(streaming.signal)]);
  const running = s.pi.prompt("long answer").catch(() => undefined);
  await streaming.promise;
  // Shutdown waits for the notifier, so anything queued would have reached the webhook by now.
  await s.pi.dispose({ keepRoot: true });
  await running;
  assert.equal(s.webhook.events.length, 0);
});

test("notices produced right before quitting are still delivered", async (t) => {
  const s = await setup(t);
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("last words")]);
  await s.pi.prompt("final task");
  s.probe.send({ status: "failed", summary: "sent in the same tick as quitting", eventId: "last" });
  // No wait for the webhook: quitting must hand over and flush what was produced just before.
  await s.pi.dispose({ keepRoot: true });
  assert.deepEqual(
    s.webhook.events.map((e) => `${e.body.status}:${e.body.task || e.body.summary}`),
    ["completed:final task", "failed:sent in the same tick as quitting"],
  );
});

test("a subagent session never sends, whatever it does", async (t) => {
  const s = await setup(t, { mode: "print", persist: false });
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("sub result")]);
  await s.pi.prompt("subtask");
  s.probe.send({ status: "info", summary: "from a subagent" });
  await s.pi.dispose({ keepRoot: true });
  assert.equal(s.webhook.events.length, 0);
});

test("started, tool-error and progress notices when switched on, finals bypassing the minimum interval", async (t) => {
  const s = await setup(
    t,
    { tools: [echoTool(), failingTool()] },
    {
      notify: { started: true, progress: true, toolError: true },
      progress: { firstAfterMs: 3_600_000, intervalMs: 3_600_000, toolCountThreshold: 3, errorCooldownMs: 0 },
      delivery: { minIntervalMs: 0, backoffMs: 0 },
    },
  );
  await s.pi.prompt("/anon-notify");
  s.pi.script([toolCall("echo", "explode", "echo"), text("handled it")]);
  await s.pi.prompt("busy work");
  const events = await s.webhook.waitForEvents(4);
  assert.deepEqual(
    events.map((e) => e.body.status),
    ["started", "tool_error", "progress", "completed"],
  );
  assert.match(events[1]!.body.summary, /工具 explode 出错：disk full/);
  assert.equal(new Set(events.map((e) => e.body.event_id)).size, 4);
});

test("the non-final minimum interval holds back a second started notice but never a final one", async (t) => {
  const s = await setup(t, {}, { notify: { started: true } });
  await s.pi.prompt("/anon-notify");
  s.pi.script([text("one"), text("two")]);
  await s.pi.prompt("first");
  await s.pi.prompt("second");
  const events = await s.webhook.waitForEvents(3);
  assert.deepEqual(
    events.map((e) => `${e.body.status}:${e.body.task}`),
    ["started:first", "completed:first", "completed:second"],
  );
});

test("explicit anon-notify:send warnings and infos are not held back by the progress interval", async (t) => {
  const s = await setup(t, {}, { notify: { started: true } });
  await s.pi.prompt("/anon-notify");
  s.probe.send({ status: "warning", summary: "磁盘快满了", eventId: "disk-1" });
  s.probe.send({ status: "info", summary: "索引已更新", eventId: "index-1" });
  s.probe.send({ status: "warning", summary: "磁盘仍然快满", eventId: "disk-2" });
  s.pi.script([text("done")]);
  await s.pi.prompt("after the requests");
  const events = await s.webhook.waitForEvents(5);
  const sessionId = s.pi.session.sessionManager.getSessionId();
  assert.deepEqual(
    events.map((e) => (e.body.event_id.startsWith("ext:") ? e.body.event_id : `${e.body.status}:${e.body.task}`)),
    [`ext:${sessionId}:disk-1`, `ext:${sessionId}:index-1`, `ext:${sessionId}:disk-2`, "started:after the requests", "completed:after the requests"],
    "all three requests within the interval arrive, and they do not use up the started notice's interval",
  );
  assert.deepEqual(
    events.slice(0, 3).map((e) => e.body.status),
    ["warning", "info", "warning"],
  );
});

test("anon-notify:send from another extension is validated, scoped to the session, and deduplicated", async (t) => {
  const s = await setup(t);
  s.probe.send({ status: "completed", summary: "while inactive", eventId: "early" });
  await s.pi.prompt("/anon-notify");
  s.probe.send({ status: "bogus", summary: "x" });
  assert.match(s.pi.notices().at(-1) ?? "", /anon-notify:send 请求无效.*status/);
  const request = { status: "completed", source: "另一个扩展", task: "索引构建", summary: "已处理 500 个文件", eventId: "index-build-001" };
  s.probe.send(request);
  s.probe.send(request);
  s.probe.send({ status: "info", summary: "第二条", eventId: "index-build-002", delivery: "direct" });
  const events = await s.webhook.waitForEvents(2);
  const sessionId = s.pi.session.sessionManager.getSessionId();
  assert.deepEqual(
    events.map((e) => e.body.event_id),
    [`ext:${sessionId}:index-build-001`, `ext:${sessionId}:index-build-002`],
  );
  const [first, second] = events.map((e) => e.body);
  assert.equal(first!.source, "另一个扩展");
  assert.equal(first!.task, "索引构建");
  assert.equal(first!.summary, "已处理 500 个文件");
  assert.ok(first!.context_usage === null || typeof first!.context_usage.context_window === "number");
  assert.equal(second!.status, "info");
  assert.equal(second!.delivery, "direct");
  assert.equal(second!.source, "Pi Agent · work", "the configured source when none is given");
  await s.pi.dispose({ keepRoot: true });
  assert.equal(s.webhook.events.length, 2, "the duplicate was never sent");
});
