/**
 * Presence and the command channel inside a REAL Pi session (SDK + faux model), talking over real
 * HTTP (the extension's own undici client) to a scripted protocol server on 127.0.0.1.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import type { ExtensionFactory, ToolDefinition } from "@earendil-works/pi-coding-agent";
import { createWebhookClient } from "../../extension/server-client/http-client.ts";
import { installCommandChannel, type CommandChannel } from "../../commands.ts";
import { Presence, createRuntimeId } from "../../extension/presence/presence.ts";
import { ServerFacts } from "../../extension/server-client/server-facts.ts";
import { SEND_CHANNEL } from "../../protocol/state-bus.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { ai, latch, makeRoot, startPi, waitForAbortStep } from "../../harness/pi.ts";
import { commandMessages, gatedTool, settled } from "../../harness/session-commands.ts";
import { command, startScriptedApi, type ScriptedApi } from "../helpers/scripted-api.ts";
import { echoTool } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";

const PNG_1PX = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=";

interface Observed {
  reports: string[];
  /** What went out on the public `anon-notify:send` bus: the channel's own notices never do. */
  bus: unknown[];
  /** Notices the channel handed to the session's notices directly. */
  notices: unknown[];
  runtimeIds: string[];
  server?: ServerFacts;
  channel?: CommandChannel;
}

/** The two services wired the way index.ts does, started as soon as the session starts (an active session). */
function servicesExtension(api: ScriptedApi, journalFile: string, observed: Observed, heartbeatIntervalMs = 60_000, idleSettleMs?: number): ExtensionFactory {
  return (pi) => {
    const client = createWebhookClient({ endpoint: api.endpoint, token: api.token, timeoutMs: 5_000 });
    const runtimeId = createRuntimeId();
    observed.runtimeIds.push(runtimeId);
    const report = (message: string) => observed.reports.push(message);
    const config = {
      presence: { ...DEFAULT_CONFIG.presence, heartbeatIntervalMs },
      command: { ...DEFAULT_CONFIG.command, journal: journalFile, longPollMs: 20_000 },
    };
    const connection = () => ({ client, config });
    const text = () => messagesFor("zh-CN");
    const server = new ServerFacts();
    const presence = new Presence(pi, { runtimeId, connection, server, report, text, ...(idleSettleMs === undefined ? {} : { idleSettleMs }) });
    const notify = (request: unknown) => observed.notices.push(request);
    const channel = installCommandChannel(pi, { presence, server, runtimeId, connection, report, text, notify, runNow: () => undefined });
    observed.server = server;
    observed.channel = channel;
    pi.events.on(SEND_CHANNEL, (data) => observed.bus.push(data));
    pi.on("session_start", (_event, ctx) => {
      presence.start(ctx);
      channel.start(ctx);
    });
    pi.on("session_shutdown", async () => {
      await Promise.all([channel.stop(), presence.stop()]);
      await client.close();
    });
  };
}

/** Starts scripted servers and Pi runtimes for one test and tears all of them down after it, newest first. */
function fixtures(t: { after: (fn: () => Promise<void>) => void }) {
  const teardown: (() => Promise<void> | void)[] = [];
  t.after(async () => {
    for (const step of teardown.reverse()) await step();
  });
  return {
    own(root: string) {
      teardown.push(() => rmSync(root, { recursive: true, force: true }));
      return root;
    },
    async setup(
      options: {
        root?: string;
        sessionFile?: string;
        tools?: ToolDefinition[];
        heartbeatIntervalMs?: number;
        idleSettleMs?: number;
        after?: (observed: Observed) => ExtensionFactory;
        commandProtocol?: number;
      } = {},
    ) {
      const api = await startScriptedApi(options.commandProtocol === undefined ? {} : { commandProtocol: options.commandProtocol });
      teardown.push(() => api.close());
      const root = options.root ?? this.own(makeRoot());
      const journalFile = join(root, "agent", "extension-data", "anon-notify", "commands.jsonl");
      const observed: Observed = { reports: [], bus: [], notices: [], runtimeIds: [] };
      const pi = await startPi({
        extension: false,
        root,
        ...(options.sessionFile ? { sessionFile: options.sessionFile } : {}),
        tools: options.tools ?? [],
        extensions: [
          servicesExtension(api, journalFile, observed, options.heartbeatIntervalMs, options.idleSettleMs),
          ...(options.after ? [options.after(observed)] : []),
        ],
      });
      let disposed = false;
      const dispose = async () => {
        if (disposed) return;
        disposed = true;
        await pi.dispose({ keepRoot: true });
      };
      teardown.push(dispose);
      return { api, pi, root, journalFile, observed, dispose };
    },
  };
}

function journalIds(file: string): string[] {
  if (!existsSync(file)) return [];
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .filter(Boolean)
    .map((line) => JSON.parse(line).command_id);
}

test("an idle session receives an instruction through the held claim, journals it before the ACK, and answers it", { timeout: 30_000 }, async (t) => {
  const { api, pi, journalFile, observed } = await fixtures(t).setup();
  await api.until(() => api.waitingClaims() === 1, "api.waitingClaims() === 1");
  assert.equal(api.heartbeats.length, 1, "exactly one heartbeat before the first claim");
  assert.equal(api.heartbeats[0]!.state, "idle");
  assert.equal(api.heartbeats[0]!.command_protocol, 3);
  const held = api.claims.at(-1)!.query;
  assert.equal(held.wait_ms, 20_000);
  assert.equal(held.capabilities, "images");

  let journalAtAck: string[] = [];
  let lastClaimAtAck: string | null | undefined;
  api.onAck = () => {
    journalAtAck = journalIds(journalFile);
    lastClaimAtAck = api.claims.at(-1)!.answered;
  };
  pi.script([ai.fauxAssistantMessage("已经重新运行测试，全部通过。")]);
  const done = settled(pi);
  api.enqueue(command("c-1", "请重新运行测试"));
  await done;
  await api.until(() => api.acks.length === 1, "api.acks.length === 1");

  assert.deepEqual(journalAtAck, ["c-1"], "the id was on disk when the ACK arrived");
  assert.equal(lastClaimAtAck, "c-1", "no new claim while the ACK was outstanding");
  assert.equal(api.acks[0]!.status, 200);
  const messages = commandMessages(pi);
  assert.equal(messages.length, 1);
  assert.equal(messages[0]!.content, "请重新运行测试");
  assert.equal(messages[0]!.details.command_id, "c-1");
  const seen = pi.modelCalls[0]!.messages.at(-1)!;
  assert.equal(seen.role, "user");
  assert.equal(JSON.stringify(seen.content).includes("c-1"), false, "no id reaches the model");
  assert.ok(JSON.stringify(seen.content).includes("请重新运行测试"));
  assert.deepEqual(observed.reports, []);
  // Running at once, then idle again once the session stayed idle (IDLE_SETTLE_MS).
  await api.until(() => api.heartbeats.length === 3, "the idle heartbeat after the run");
  assert.deepEqual(
    api.heartbeats.map((h) => h.state),
    ["idle", "running", "idle"],
  );
});

test("a busy session takes an instruction at a turn boundary, after the tool batch and before the next model call", { timeout: 30_000 }, async (t) => {
  const slow = gatedTool("slow");
  const { api, pi } = await fixtures(t).setup({ tools: [slow.tool] });
  await api.until(() => api.waitingClaims() === 1, "api.waitingClaims() === 1");
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ...Array.from({ length: 3 }, () => ai.fauxAssistantMessage("已处理")),
  ]);
  const run = pi.prompt("开始一个长任务");
  await slow.started;
  // The run withdrew the idle claim: nothing is claimed while the tool runs.
  await api.until(() => api.waitingClaims() === 0, "api.waitingClaims() === 0");
  api.enqueue(command("c-a", "第一条指令"));
  api.enqueue(command("c-b", "第二条指令"));
  slow.release();
  await run;
  await api.until(() => api.acks.filter((a) => a.status === 200).length === 2, "api.acks.filter((a) => a.status === 200).length === 2");
  await pi.session.waitForIdle();

  const branch = pi.session.sessionManager.getBranch().filter((e) => e.type === "message" || e.type === "custom_message");
  const label = (e: (typeof branch)[number]) =>
    e.type === "custom_message"
      ? `custom:${(e.details as { command_id: string }).command_id}`
      : `${e.message.role}${e.message.role === "assistant" ? `:${e.message.stopReason}` : ""}`;
  const labels = branch.map(label);
  assert.deepEqual(
    labels.filter((l) => l.startsWith("custom:")),
    ["custom:c-a", "custom:c-b"],
    "each once, in order",
  );
  const toolResultAt = labels.indexOf("toolResult");
  assert.ok(labels.indexOf("custom:c-a") > toolResultAt, "never inside the running tool batch");
  for (const [i, l] of labels.entries()) {
    if (!l.startsWith("custom:")) continue;
    assert.ok(["toolResult", "assistant:stop"].includes(labels[i - 1]!), `${l} follows a finished turn: ${labels.join(" ")}`);
    assert.equal(labels[i + 1], "assistant:stop", `${l} is answered by the next model call`);
  }
  const first = api.claims.filter((c) => c.answered === "c-a");
  assert.equal(first.length, 1);
  assert.equal(first[0]!.query.wait_ms, 0, "a busy session claims at a turn end without holding the request");
  // c-b follows once c-a is ACKed: at a later turn end, or by the idle claim after the run.
  assert.equal(api.claims.filter((c) => c.answered === "c-b").length, 1);
});

test("a redelivered lease and a restarted Pi ACK a journaled command without a second copy in the session", { timeout: 40_000 }, async (t) => {
  const fx = fixtures(t);
  const root = fx.own(makeRoot());
  const first = await fx.setup({ root });
  await first.api.until(() => first.api.waitingClaims() === 1, "first.api.waitingClaims() === 1");
  first.api.failNextAck("c-1", 409, "lease_mismatch");
  first.pi.script([ai.fauxAssistantMessage("好的")]);
  const done = settled(first.pi);
  first.api.enqueue(command("c-1", "只执行一次"));
  await done;
  await first.api.until(() => first.api.acks.length === 1, "first.api.acks.length === 1");
  assert.equal(first.api.acks[0]!.status, 409);
  // The lease expires on the server; the same runtime claims it again.
  first.api.expireLease("c-1");
  await first.api.until(() => first.api.acks.length === 2, "first.api.acks.length === 2");
  assert.equal(first.api.acks[1]!.status, 200);
  assert.equal(commandMessages(first.pi).length, 1);

  // A new Pi process on the same session and data folder, and a server that hands c-1 out again.
  const sessionFile = first.pi.sessionFile()!;
  await first.dispose();
  const second = await fx.setup({ root, sessionFile });
  await second.api.until(() => second.api.waitingClaims() === 1, "second.api.waitingClaims() === 1");
  second.api.enqueue(command("c-1", "只执行一次"));
  await second.api.until(() => second.api.acks.length === 1, "second.api.acks.length === 1");
  assert.equal(second.api.acks[0]!.status, 200);
  assert.equal(commandMessages(second.pi).length, 1, "still one copy after the restart");
  assert.deepEqual(journalIds(second.journalFile), ["c-1"]);
  assert.equal(second.pi.modelCalls.length, 0, "the restarted session never ran the command again");
});

test("an instruction with images reaches the model as text then image blocks", { timeout: 30_000 }, async (t) => {
  const { api, pi } = await fixtures(t).setup();
  await api.until(() => api.waitingClaims() === 1, "api.waitingClaims() === 1");
  pi.script([ai.fauxAssistantMessage("看到图片了")]);
  const done = settled(pi);
  api.enqueue(command("c-img", "看看这张截图", { images: [{ mime_type: "image/png", data: PNG_1PX }] }));
  await done;
  const seen = pi.modelCalls[0]!.messages.at(-1)!;
  assert.deepEqual(seen.content, [
    { type: "text", text: "看看这张截图" },
    { type: "image", data: PNG_1PX, mimeType: "image/png" },
  ]);
});

test("an instruction the user interrupts before any reply is kept, ACKed once, and reported to the user and the persona", { timeout: 30_000 }, async (t) => {
  const { api, pi, observed } = await fixtures(t).setup();
  await api.until(() => api.waitingClaims() === 1, "api.waitingClaims() === 1");
  const modelStarted = latch();
  pi.script([waitForAbortStep(modelStarted.signal)]);
  const done = settled(pi);
  api.enqueue(command("c-x", "把日志整理一下"));
  await modelStarted.promise;
  await pi.session.abort();
  await done;
  await api.until(() => api.acks.length === 1, "api.acks.length === 1");

  assert.equal(api.acks[0]!.status, 200, "the session took it in, so it is not redelivered");
  assert.equal(commandMessages(pi).length, 1);
  const warnings = observed.reports.filter((n) => n.includes("被中断"));
  assert.equal(warnings.length, 1);
  assert.ok(warnings[0]!.includes("把日志整理一下"));
  assert.ok(warnings[0]!.startsWith("Anon 的指令"), `the warning names who sent it: ${warnings[0]}`);
  assert.deepEqual(observed.bus, [], "not through the public bus: straight to the session's notices");
  assert.deepEqual(observed.notices, [
    {
      status: "warning",
      task: "Anon 指令未得到回复",
      summary: "指令已进入 Pi 会话，但用户中断了这次运行，Agent 尚未回复。指令内容：把日志整理一下",
      eventId: "cmd-interrupted:c-x",
      details: { command_id: "c-x", event_id: "ev-c-x", reason: "interrupted" },
    },
  ]);
});

test("heartbeats follow the real state, never move activity on the timer, and end with one offline", { timeout: 30_000 }, async (t) => {
  const compile = gatedTool("compile");
  const { api, pi, observed, dispose } = await fixtures(t).setup({ tools: [compile.tool], heartbeatIntervalMs: 1_000 });
  await api.until(() => api.heartbeats.length >= 3, "api.heartbeats.length >= 3");
  const idleBeats = api.heartbeats.slice(0, 3);
  assert.ok(idleBeats.every((h) => h.state === "idle" && h.activity === null));
  assert.equal(new Set(idleBeats.map((h) => h.last_activity_at)).size, 1, "the timer alone never advances activity");

  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("compile", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("编译完成")]);
  const run = pi.prompt("编译");
  await compile.started;
  await api.until(() => api.heartbeats.some((h) => h.activity === "compile"), 'api.heartbeats.some((h) => h.activity === "compile")');
  const during = api.heartbeats.find((h) => h.activity === "compile")!;
  assert.equal(during.state, "running");
  assert.ok(Date.parse(during.last_activity_at) > Date.parse(idleBeats[0]!.last_activity_at));
  compile.release();
  await run;
  await api.until(() => api.heartbeats.at(-1)!.state === "idle", 'api.heartbeats.at(-1)!.state === "idle"');

  const sessionFile = pi.sessionFile()!;
  await dispose();
  assert.deepEqual(api.offlines, [{ session_id: during.session_id, runtime_id: observed.runtimeIds[0] }]);
  assert.equal(api.log.filter((l) => l.startsWith("POST /sessions/heartbeat")).length, api.heartbeats.length);
  const file = readFileSync(sessionFile, "utf8");
  assert.ok(file.includes("编译完成"));
  assert.equal(file.includes("heartbeat"), false, "heartbeats never enter the session file");
});

/** Until the start's heartbeat is answered and has left the send loop, a run's heartbeat would only be queued behind it. */
async function firstHeartbeatAnswered(observed: Observed) {
  assert.equal(await observed.server!.whenAccepted(), true);
  await new Promise(setImmediate);
}

test("runs that follow each other at once send one running state; the idle state follows once the session stays idle", { timeout: 30_000 }, async (t) => {
  const fixture = fixtures(t);
  // A settle far longer than any gap between two awaited prompts, so the burst cannot be split by a busy machine.
  const burst = await fixture.setup({ idleSettleMs: 60_000 });
  await firstHeartbeatAnswered(burst.observed);
  await burst.api.until(() => burst.api.waitingClaims() === 1, "the idle long poll held before the runs");
  burst.pi.script(Array.from({ length: 5 }, (_, i) => ai.fauxAssistantMessage(`第 ${i + 1} 轮`)));
  for (let i = 0; i < 5; i++) await burst.pi.prompt(`第 ${i + 1} 轮`);
  await burst.api.until(() => burst.api.heartbeats.length === 2, "the running heartbeat");
  assert.deepEqual(
    burst.api.heartbeats.map((h) => h.state),
    ["idle", "running"],
    "five back-to-back runs: one running heartbeat, no idle in between",
  );
  const instructionClaims = () => burst.api.claims.filter((c) => c.query.lane !== "control").length;
  assert.equal(instructionClaims(), 1, "no idle long poll between the runs: the server never heard idle");

  const single = await fixture.setup({ idleSettleMs: 50 });
  await firstHeartbeatAnswered(single.observed);
  single.pi.script([ai.fauxAssistantMessage("完成")]);
  await single.pi.prompt("一轮");
  await single.api.until(() => single.api.heartbeats.length === 3, "the idle heartbeat after the settle");
  await single.api.until(() => single.api.waitingClaims() === 1, "the idle long poll, held again once the server heard idle");
  assert.deepEqual(
    single.api.heartbeats.map((h) => h.state),
    ["idle", "running", "idle"],
  );
});

test("an instruction still queued when the user presses Esc is written into the session without a run, ACKed and reported", { timeout: 30_000 }, async (t) => {
  const slow = gatedTool("slow");
  let escape: () => void = () => {};
  // Registered after the channel: at a turn end it sees what the channel just did, and presses Esc
  // the way Pi's TUI does (clear the queues, then abort) while our steer is still queued.
  const esc =
    (observed: Observed): ExtensionFactory =>
    (pi) => {
      let pressed = false;
      pi.on("turn_end", async (event) => {
        const channel = observed.channel!;
        if (pressed) return;
        if (event.turnIndex === 0) {
          await waitUntil(() => channel.pending().held === "c-q", "the channel held command c-q for the next boundary");
        } else if (channel.pending().queued.includes("c-q")) {
          pressed = true;
          escape();
        }
      });
    };
  const { api, pi, observed } = await fixtures(t).setup({ tools: [slow.tool], after: esc });
  escape = () => {
    pi.session.clearQueue();
    void pi.session.abort();
  };
  await api.until(() => api.waitingClaims() === 1, "api.waitingClaims() === 1");
  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("继续中")]);
  const done = settled(pi);
  const run = pi.prompt("开始");
  await slow.started;
  await api.until(() => api.waitingClaims() === 0, "api.waitingClaims() === 0");
  api.enqueue(command("c-q", "顺便更新一下文档"));
  slow.release();
  await run;
  await done;
  await api.until(() => api.acks.length === 1, "api.acks.length === 1");

  assert.equal(api.acks[0]!.status, 200);
  assert.deepEqual(
    commandMessages(pi).map((m) => m.details.command_id),
    ["c-q"],
    "kept in the session, once",
  );
  assert.equal(JSON.stringify(pi.modelCalls).includes("顺便更新一下文档"), false, "no run was started for it");
  assert.ok(observed.reports.some((n) => n.includes("被中断") && n.includes("顺便更新一下文档")));
  assert.equal((observed.notices[0] as { eventId: string }).eventId, "cmd-interrupted:c-q");
  assert.deepEqual(observed.bus, []);

  // The next prompt carries it to the model: it was neither lost nor run against the interrupt.
  pi.script([ai.fauxAssistantMessage("文档已更新")]);
  await pi.prompt("继续");
  assert.ok(JSON.stringify(pi.modelCalls.at(-1)!.messages).includes("顺便更新一下文档"));
});

test("with a protocol-3 server one control poll stays open idle and busy; unknown kinds are ACKed unknown, registered ones by their handler", {
  timeout: 30_000,
}, async (t) => {
  const slow = gatedTool("slow");
  const { api, pi, journalFile, observed } = await fixtures(t).setup({ tools: [slow.tool], commandProtocol: 3 });
  await api.until(() => api.waitingClaims("control") === 1 && api.waitingClaims() === 1, "a control poll and an idle instruction poll held");
  assert.ok(api.claims.filter((c) => c.query.lane === "control").every((c) => c.query.wait_ms === 20_000));

  // Idle: a stop finds nothing to stop, is journaled, then ACKed.
  let journalAtAck: string[] = [];
  api.onAck = () => (journalAtAck = journalIds(journalFile));
  api.enqueue(command("c-stop-idle", "", { kind: "stop", payload: {} }));
  await api.until(() => api.acks.length === 1, "the idle stop ACKed");
  assert.deepEqual([api.acks[0]!.body.outcome, api.acks[0]!.status], ["already_idle", 200]);
  assert.deepEqual(journalAtAck, ["c-stop-idle"], "journaled before the ACK");

  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("完成")]);
  const run = pi.prompt("开始");
  await slow.started;
  await api.until(() => api.waitingClaims("control") === 1, "the control poll is held while a tool runs");
  const decisions: unknown[] = [];
  const off = observed.channel!.control.on("approval_decision", (c) => {
    decisions.push(c.payload);
    return "applied";
  });
  const payload = { approval_id: "a-1", decision: "approved", reason: null, binding: { tool_call_id: "t-1", args_digest: "d", cwd: "/w" } };
  api.enqueue(command("c-decision", "", { kind: "approval_decision", payload }));
  await api.until(() => api.acks.length === 2, "the decision ACKed while the tool runs");
  assert.deepEqual(decisions, [payload]);
  assert.equal(api.acks[1]!.body.outcome, "applied");
  off();
  api.enqueue(command("c-nobody", "", { kind: "approval_decision", payload }));
  await api.until(() => api.acks.length === 3, "an unhandled kind ACKed");
  assert.equal(api.acks[2]!.body.outcome, "unknown");
  slow.release();
  await run;
  assert.equal(commandMessages(pi).length, 0, "control commands never enter the session");
});

test("a control command whose ACK was lost is ACKed again with its journaled outcome, never applied twice", { timeout: 30_000 }, async (t) => {
  const { api, journalFile, observed } = await fixtures(t).setup({ commandProtocol: 3 });
  await api.until(() => api.waitingClaims("control") === 1, "a control poll held");
  let applied = 0;
  observed.channel!.control.on("approval_decision", () => {
    applied++;
    return "applied";
  });
  const payload = { approval_id: "a-1", decision: "approved", reason: null, binding: { tool_call_id: "t-1", args_digest: "d", cwd: "/w" } };
  api.failNextAck("c-lost", 400, "invalid_request");
  api.enqueue(command("c-lost", "", { kind: "approval_decision", payload }));
  await api.until(() => api.acks.length === 1, "the first ACK refused");
  api.expireLease("c-lost");
  await api.until(() => api.acks.length === 2, "the redelivered command ACKed");
  assert.equal(applied, 1, "the handler ran once");
  assert.deepEqual(
    api.acks.map((a) => [a.body.outcome, a.status]),
    [
      ["applied", 400],
      ["applied", 200],
    ],
  );
  assert.deepEqual(journalIds(journalFile), ["c-lost"], "journaled once");
  assert.ok(
    observed.reports.some((r) => r.includes("HTTP 400")),
    `the lost ACK was told: ${observed.reports.join(" | ")}`,
  );
});

test("with a protocol-3 server an instruction leased just as a run starts is read from the held claim and delivered at a turn end of that run", {
  timeout: 30_000,
}, async (t) => {
  let enqueueAtStart: (() => void) | undefined;
  // Registered after the channel: at the run's start, the server answers the still-held idle claim.
  const atStart = (): ExtensionFactory => (pi) => {
    pi.on("agent_start", () => {
      enqueueAtStart?.();
      enqueueAtStart = undefined;
    });
  };
  const { api, pi } = await fixtures(t).setup({ tools: [echoTool()], commandProtocol: 3, after: atStart });
  await api.until(() => api.waitingClaims() === 1, "the idle instruction poll held");
  enqueueAtStart = () => api.enqueue(command("c-race", "刚开始运行时送到的指令"));
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("echo", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("已处理"),
    ai.fauxAssistantMessage("指令也处理了"),
  ]);
  await pi.prompt("开始");
  await api.until(() => api.acks.some((a) => a.commandId === "c-race" && a.status === 200), "the command leased at the run's start was delivered and ACKed");
  assert.equal(api.claims.filter((c) => c.answered === "c-race").length, 1, "leased once, never left to expire");
  assert.deepEqual(
    commandMessages(pi).map((m) => m.details.command_id),
    ["c-race"],
  );
  const branch = pi.session.sessionManager.getBranch().map((e) => (e.type === "message" ? e.message.role : e.type));
  const at = branch.indexOf("custom_message");
  assert.ok(
    ["assistant", "toolResult"].includes(branch[at - 1]!) && branch[at + 1] === "assistant",
    `at a turn end, answered in the same run: ${branch.join(" ")}`,
  );
  assert.equal(pi.modelCalls.length, 3, "one prompt, one run");
});
