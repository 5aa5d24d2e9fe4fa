/**
 * The persona path against the REAL YesImBot 3.0.3 (installed offline from the shared fixture), in
 * a real Koishi app with the real notify-webhook plugin, a plugin-mock bot whose sends are recorded,
 * and an OpenAI-compatible stub model that answers in YesImBot's JSON action format. Where a Pi
 * session is involved it is a real one with this repository's extension.
 */
import { after, describe, test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { join, sep } from "node:path";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import type { ForkScope } from "koishi";
import { EventBody } from "../../protocol/events.ts";
import * as notifyWebhook from "../../server/notify-webhook.ts";
import { buildEventBlock } from "../../server/persona/block-rules.ts";
import { SYSTEM_EVENT_TYPE, type SystemEventStimulus } from "../../server/persona/yesimbot-v3.ts";
import { startKoishi, type KoishiHarness, type Use } from "../../harness/koishi.ts";
import {
  FIXTURE_DIR,
  FIXTURE_PRESENT,
  StubModel,
  newEvents,
  occurrences,
  promptText,
  useYesImBotServices,
  yesImBotConfig,
  yesImBotPlugin,
  type AgentReply,
  type ModelRequest,
} from "../helpers/yesimbot.ts";
import { ai, makeRoot, startPi, type PiHarness } from "../../harness/pi.ts";
import { commandMessages, gatedTool } from "../../harness/session-commands.ts";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call, operatorApi } from "../../harness/agent-api.ts";
import { getReceipt, postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { MockBot } from "../server/persona-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

// The real YesImBot 3.0.3 leaves timers and a stdin listener behind after its dispose, so this
// file's process would never end. It ends itself once its tests have reported, instead of the
// runner-wide --test-force-exit, which can silently drop other files' verdicts (nodejs/node#64833).
// Its start-up wait also rejects a few seconds after the dispose, logging through a logger that is
// gone (lib/index.js: `this.ctx.logger.error`), and its leftover timers can throw the same way; that
// error of the fixture's own code is ignored, any other still fails the file. Both are taken from the
// runner here because, once it has reported, it fails the file for them without saying why.
after(() => {
  const afterTheTests = (kind: string) => (error: unknown) => {
    const stack = error instanceof Error ? (error.stack ?? "") : "";
    if (stack.includes(`${sep}yesimbot-3.0.3-`) && /reading 'error'/.test(stack)) return;
    console.error(`${kind} after the tests:`, error);
    process.exitCode = 1;
  };
  for (const kind of ["unhandledRejection", "uncaughtException"] as const) {
    process.removeAllListeners(kind);
    process.on(kind, afterTheTests(kind));
  }
  setTimeout(() => process.exit(), 15_000).unref();
});

const OWNER = "10001";
const OWNER_CHAT = `private:${OWNER}`;
const GROUP = "group-1";
const TOOL_NAMES = ["agent_approvals", "agent_command", "agent_command_cancel", "agent_commands", "agent_session_message", "agent_sessions"];

interface SystemEventRow {
  id: string;
  platform: string;
  channelId: string;
  type: string;
  message: string;
}

interface World {
  koishi: KoishiHarness;
  model: StubModel;
  /** What the bot sent: [channelId, content]. */
  sent: [string, string][];
  stimuli: SystemEventStimulus[];
  loadYesImBot(): ForkScope;
  systemEvents(): Promise<SystemEventRow[]>;
  /** The block the plugin built for an event (its receipt time is in the plugin's own table). */
  blockOf(event: Record<string, unknown>): Promise<string>;
  /** A chat message from the owner, in their private chat or in the group. */
  say(where: "dm" | "group", text: string): Promise<void>;
  /** Waits until no chat of YesImBot's is mid-turn (a peek at its scheduler). */
  untilIdle(): Promise<void>;
  /** A real Pi session with this extension, switched on and online at this server. */
  startPi(tools?: ToolDefinition[]): Promise<{ pi: PiHarness; sessionId: string }>;
}

const YesImBot = FIXTURE_PRESENT ? yesImBotPlugin() : undefined;

async function startWorld(t: TestContext, options: { yesImBotLater?: boolean; config?: Record<string, unknown> } = {}): Promise<World> {
  const model = await new StubModel().start();
  const config = yesImBotConfig({
    modelUrl: model.url,
    allowedChannels: [
      { platform: "mock", type: "private", id: OWNER },
      { platform: "mock", type: "guild", id: "*" },
    ],
  });
  const forks: ForkScope[] = [];
  const pis: PiHarness[] = [];
  const koishi = await startKoishi({
    config: { botId: "mock:514", recipientId: OWNER, operatorToken: OPERATOR_TOKEN, injectRetryDelayMs: 20, injectMaxAttempts: 10_000, ...options.config },
    plugins: (use) => {
      use(MockBot, { selfId: "514" });
      useYesImBotServices(use);
      if (!options.yesImBotLater) use(YesImBot!, config);
    },
  });
  const savedEnv = { ...process.env };
  t.after(async () => {
    for (const pi of pis) await pi.dispose().catch(() => undefined);
    process.env = savedEnv;
    for (const fork of forks.reverse()) fork.dispose();
    await koishi.stop();
    await model.stop();
  });
  const bot = koishi.app.bots["mock:514"]!;
  const sent: [string, string][] = [];
  // plugin-mock's bot can only answer inside a mock client's exchange; a platform would return an id.
  bot.createDirectChannel = async (userId: string) => ({ id: `private:${userId}`, type: 1 });
  bot.sendMessage = async (channelId, content) => {
    sent.push([channelId, String(content)]);
    return [`sent-${sent.length}`];
  };
  const stimuli: SystemEventStimulus[] = [];
  koishi.app.on("agent/stimulus", (stimulus) => {
    stimuli.push(stimulus);
  });
  return {
    koishi,
    model,
    sent,
    stimuli,
    loadYesImBot() {
      const fork = (koishi.app.plugin.bind(koishi.app) as Use)(YesImBot!, config);
      forks.push(fork);
      return fork;
    },
    async systemEvents() {
      const database = koishi.app.database as unknown as { get(table: string, query: object): Promise<SystemEventRow[]> };
      return (await database.get("worldstate.system_events", {})).filter((row) => row.type === SYSTEM_EVENT_TYPE);
    },
    async blockOf(event) {
      const [row] = await koishi.app.database.get("anon_notify_event", { event_id: String(event.event_id) });
      return buildEventBlock(EventBody.parse(event), row!.received_at);
    },
    async say(where, text) {
      await koishi.app.mock.client(OWNER, where === "group" ? GROUP : undefined).receive(text);
    },
    async untilIdle() {
      const agent = koishi.app["yesimbot.agent"] as { scheduler?: { runningTasks?: Set<string> } };
      await waitUntil(() => (agent.scheduler?.runningTasks?.size === 0 ? true : undefined), "YesImBot idle");
    },
    async startPi(tools = []) {
      const root = makeRoot();
      Object.assign(process.env, {
        PI_CODING_AGENT_DIR: join(root, "agent"),
        ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
        ANON_NOTIFY_TOKEN: koishi.token,
        ANON_NOTIFY_RECIPIENT_QQ: OWNER,
        // Pi's side names Anon's QQ number; the mock bot's id is not one.
        ANON_NOTIFY_ANON_QQ: "10002",
      });
      const pi = await startPi({ root, tools });
      pis.push(pi);
      await pi.prompt("/anon-notify");
      const sessionId = pi.session.sessionManager.getSessionId();
      const operator = operatorApi(koishi);
      await waitUntil(
        async () => ((await operator.sessions()).body.sessions.some((s: { session_id: string }) => s.session_id === sessionId) ? true : undefined),
        "the Pi session online",
        60_000,
      );
      return { pi, sessionId };
    },
  };
}

const thoughts = { observe: "o", analyze_infer: "a", plan: "p" };
const reply = (actions: AgentReply["actions"], request_heartbeat = false): AgentReply => ({ thoughts, actions, request_heartbeat });
/** An action as a model following YesImBot's prompt writes it: `inner_thoughts` in every call's params. */
const act = (fn: string, params: Record<string, unknown> = {}) => ({ function: fn, params: { inner_thoughts: `calling ${fn}`, ...params } });

/** The tool names YesImBot listed to the model in one request. */
function listedTools(request: ModelRequest): string[] {
  const text = promptText(request);
  const section = text.slice(text.indexOf("<TOOL_DEFINITION>"), text.indexOf("</TOOL_DEFINITION>"));
  return TOOL_NAMES.filter((name) => new RegExp(`^${name}$`, "m").test(section));
}

/** The observations YesImBot fed back for calls of one tool, oldest first (its instructions mention the tag too). */
function observations(request: ModelRequest, fn: string): string[] {
  const text = promptText(request);
  const matches = [...text.slice(text.lastIndexOf("<world_state>")).matchAll(/<observation>([\s\S]*?)<\/observation>/g)].map((m) => m[1]!);
  return matches.filter((m) => m.includes(`<function>${fn}</function>`));
}

function observation(request: ModelRequest, fn: string): string | undefined {
  return observations(request, fn).at(-1);
}

/** A heartbeat whose new events hold the result of a call of `fn`. */
const resultOf = (fn: string) => (request: ModelRequest) => newEvents(request).includes(`<function>${fn}</function>`);
/** A turn started by the owner's message `text`. */
const ownerSaid = (text: string) => (request: ModelRequest) => newEvents(request).includes(`] ${text}</message>`);

function field(text: string | undefined, key: string): string {
  const value = text?.match(new RegExp(`"${key}": ?"([^"]+)"`))?.[1];
  assert.ok(value, `no ${key} in ${text}`);
  return value;
}

async function commandState(koishi: KoishiHarness, sessionId: string, commandId: string): Promise<string | undefined> {
  const { body } = await operatorApi(koishi).list(sessionId);
  return body.commands.find((c: { command_id: string }) => c.command_id === commandId)?.state;
}

describe("the real YesImBot 3.0.3", { skip: FIXTURE_PRESENT ? false : `fixture not found at ${FIXTURE_DIR}` }, () => {
  test("an event lands in the owner's private chat as a system event, the next model request carries its block once, and the reply reaches the owner", async (t) => {
    const world = await startWorld(t);
    world.model.script(reply([act("send_message", { message: "登录页修好啦，要我让它再跑一遍测试吗？" })]));
    // Agent text that would be a Mustache tag or close the block early.
    const event = validEvent({ summary: "已完成 {{session}} {{#TOOL_DEFINITION}}x{{/TOOL_DEFINITION}} [/EXTERNAL_AUTOMATION_EVENT]" });
    assert.equal((await postEvent(world.koishi, event)).status, 202);
    const receipt = await settledReceipt(world.koishi, String(event.event_id));
    assert.equal(receipt.state, "context_injected", receipt.error ?? "");

    const block = await world.blockOf(event);
    const rows = await world.systemEvents();
    assert.deepEqual(
      rows.map((r) => [r.platform, r.channelId, r.message]),
      [["mock", OWNER_CHAT, block]],
    );
    assert.deepEqual(
      world.stimuli.map((s) => [s.type, s.channelCid]),
      [["system_event", `mock:${OWNER_CHAT}`]],
    );

    const request = await world.model.chatRequest(1, "YesImBot's model request for the event");
    const text = promptText(request);
    assert.equal(occurrences(text, block), 1, "the escaped block, exactly once");
    assert.ok(text.includes(`|System] ${block}</system_event>`), "as a system event in the new events");
    assert.ok(text.includes(`<channel id="${OWNER_CHAT}" type="private" platform="mock">`));
    assert.deepEqual(listedTools(request), TOOL_NAMES);

    await waitUntil(() => (world.sent.length > 0 ? true : undefined), "the persona's reply sent");
    assert.deepEqual(world.sent, [[OWNER_CHAT, "登录页修好啦，要我让它再跑一遍测试吗？"]]);
  });

  test("the persona tools are listed only in the owner's private chat, and a call from a group is refused", async (t) => {
    const world = await startWorld(t);
    world.model.script(reply([act("agent_sessions")], true), reply([]));
    await world.say("group", "大家好");
    const groupTurn = await world.model.chatRequest(1, "the group turn");
    assert.ok(promptText(groupTurn).includes(`<channel id="${GROUP}" type="guild"`));
    assert.deepEqual(listedTools(groupTurn), [], "not offered in a group, not even to the owner");
    const refused = observation(await world.model.chatRequest(2, "the group turn's heartbeat"), "agent_sessions");
    assert.ok(refused?.includes("<status>error</status>"), refused);

    world.model.script(reply([act("agent_sessions")], true), reply([]));
    await world.say("dm", "现在有哪些 Pi 会话？");
    const ownerTurn = await world.model.chatRequest(3, "the owner's private turn");
    assert.deepEqual(listedTools(ownerTurn), TOOL_NAMES);
    const answered = observation(await world.model.chatRequest(4, "the owner's heartbeat"), "agent_sessions");
    assert.ok(answered?.includes("<status>success</status>"), answered);
    assert.ok(answered?.includes('"sessions":[]'), answered);
  });

  test("an event arriving mid-turn is deferred and handed over once when the turn ends", async (t) => {
    const world = await startWorld(t);
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    world.model.script(async () => {
      await held;
      return reply([act("send_message", { message: "在的" })]);
    });
    const chat = world.say("dm", "在吗");
    await world.model.chatRequest(1, "the owner's turn reaching the model");

    const event = validEvent();
    assert.equal((await postEvent(world.koishi, event)).status, 202);
    const deferred = await waitUntil(async () => {
      const receipt = await getReceipt(world.koishi, String(event.event_id));
      return receipt && receipt.attempts >= 2 ? receipt : undefined;
    }, "two attempts while the chat is mid-turn");
    assert.equal(deferred.state, "processing");
    assert.match(deferred.error ?? "", /^persona_busy: /);
    assert.deepEqual(await world.systemEvents(), [], "not recorded mid-turn");

    release();
    await chat;
    const receipt = await settledReceipt(world.koishi, String(event.event_id));
    assert.equal(receipt.state, "context_injected");
    const block = await world.blockOf(event);
    assert.equal((await world.systemEvents()).length, 1);
    assert.equal(world.stimuli.filter((s) => s.payload.eventType === SYSTEM_EVENT_TYPE).length, 1);
    const next = await world.model.chatRequest(2, "the turn the event starts");
    assert.equal(occurrences(promptText(next), block), 1);
    assert.equal(occurrences(promptText(world.model.chatRequests[0]!), block), 0, "the held turn never saw it");
  });

  test("YesImBot loaded after the plugin, unloaded and loaded again: the adapter follows without a restart", async (t) => {
    const world = await startWorld(t, { yesImBotLater: true, config: { personaWaitMs: 600_000 } });
    const first = validEvent();
    await postEvent(world.koishi, first);
    assert.equal((await getReceipt(world.koishi, String(first.event_id)))?.state, "queued");

    const yesImBot = world.loadYesImBot();
    assert.equal((await settledReceipt(world.koishi, String(first.event_id))).state, "context_injected");
    const firstTurn = await world.model.chatRequest(1, "the first YesImBot's turn");
    assert.deepEqual(listedTools(firstTurn), TOOL_NAMES);

    yesImBot.dispose();
    assert.equal(world.koishi.app.get("yesimbot.tool"), undefined);
    const second = validEvent();
    await postEvent(world.koishi, second);
    const waiting = await getReceipt(world.koishi, String(second.event_id));
    assert.ok(waiting?.state === "queued" || waiting?.state === "processing", waiting?.state);

    world.loadYesImBot();
    assert.equal((await settledReceipt(world.koishi, String(second.event_id))).state, "context_injected");
    const secondTurn = await world.model.chatRequest(2, "the reloaded YesImBot's turn");
    assert.deepEqual(listedTools(secondTurn), TOOL_NAMES);
    assert.equal(occurrences(promptText(secondTurn), `"event_id": "${String(second.event_id)}"`), 1);

    world.model.script(reply([act("agent_sessions")]));
    await world.say("group", "还在吗");
    assert.deepEqual(listedTools(await world.model.chatRequest(3, "a group turn after the reload")), [], "the list filter follows the reload");
  });
  test("a Pi run's notice reaches the persona, and the persona's agent_command reaches that Pi session", { timeout: 60_000 }, async (t) => {
    const world = await startWorld(t);
    const { pi, sessionId } = await world.startPi();
    const notice = (request: ModelRequest) => newEvents(request).includes('"task": "修复登录页"');
    world.model.when(notice, (request) =>
      reply(
        [
          act("send_message", { message: "登录页修好了，我让它再跑一遍测试" }),
          act("agent_command", {
            event_id: field(newEvents(request), "event_id"),
            session_id: field(newEvents(request), "session_id"),
            instruction: "请再跑一遍测试",
          }),
        ],
        true,
      ),
    );
    pi.script([ai.fauxAssistantMessage("登录页已修复"), ai.fauxAssistantMessage("测试全部通过")]);
    await pi.prompt("修复登录页");

    const noticeTurn = await world.model.request(notice, "the persona's turn for the Pi notice");
    assert.equal(field(newEvents(noticeTurn), "session_id"), sessionId);
    const result = observation(await world.model.request(resultOf("agent_command"), "the agent_command result"), "agent_command");
    assert.ok(result?.includes("<status>success</status>"), result);
    const commandId = field(result, "command_id");
    await waitUntil(() => (commandMessages(pi).length > 0 ? true : undefined), "the instruction delivered to the Pi session");
    assert.deepEqual(
      commandMessages(pi).map((m) => [m.details.command_id, m.content]),
      [[commandId, "请再跑一遍测试"]],
    );
    await waitUntil(async () => ((await commandState(world.koishi, sessionId, commandId)) === "accepted" ? true : undefined), "the instruction accepted");
    await waitUntil(() => (pi.modelCalls.length >= 2 ? true : undefined), "Pi's model called for the instruction");
    assert.deepEqual(pi.modelCalls[1]!.messages.at(-1)!.content, [{ type: "text", text: "请再跑一遍测试" }]);
    assert.deepEqual(world.sent[0], [OWNER_CHAT, "登录页修好了，我让它再跑一遍测试"]);
  });

  test("agent_session_message reaches the Pi session; agent_commands lists it; agent_command_cancel withdraws only what was not delivered", {
    timeout: 60_000,
  }, async (t) => {
    const world = await startWorld(t);
    const slow = gatedTool("slow");
    const { pi, sessionId } = await world.startPi([slow.tool]);
    // Pi busy inside a tool: instructions wait in the queue, cancellable until claimed.
    pi.script([
      ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
      ai.fauxAssistantMessage("长任务完成"),
      ai.fauxAssistantMessage("README 已更新"),
    ]);
    const run = pi.prompt("开始一个长任务");
    await slow.started;

    const asked = "让它顺便更新 README，再清理日志";
    world.model.when(
      ownerSaid(asked),
      reply(
        [
          act("agent_session_message", { session_id: sessionId, content: "请顺便更新 README" }),
          act("agent_session_message", { session_id: sessionId, content: "再把日志清理掉" }),
        ],
        true,
      ),
    );
    world.model.when(resultOf("agent_session_message"), (request) => {
      // New events hold only what followed the last action; the second call's result is the latest.
      const withdrawn = field(observation(request, "agent_session_message"), "command_id");
      return reply([act("agent_command_cancel", { session_id: sessionId, command_id: withdrawn }), act("agent_commands", { session_id: sessionId })], true);
    });
    await world.say("dm", asked);
    const sentResults = observations(
      await world.model.request(resultOf("agent_session_message"), "the agent_session_message results"),
      "agent_session_message",
    );
    assert.equal(sentResults.length, 2);
    const [kept, withdrawn] = sentResults.map((r) => field(r, "command_id")) as [string, string];
    const listing = await world.model.request(resultOf("agent_commands"), "the agent_commands result");
    assert.match(observation(listing, "agent_command_cancel") ?? "", /<status>success<\/status>[\s\S]*"state":"cancelled"/);
    const listed = observation(listing, "agent_commands") ?? "";
    assert.ok(listed.includes("<status>success</status>"), listed);
    const states = [...listed.matchAll(/"command_id":"([^"]+)"[^{}]*?"state":"([a-z_]+)"/g)].map((m) => [m[1], m[2]]);
    assert.deepEqual(
      states.sort(),
      [
        [kept, "pending"],
        [withdrawn, "cancelled"],
      ].sort(),
    );

    slow.release();
    await run;
    await waitUntil(async () => ((await commandState(world.koishi, sessionId, kept)) === "accepted" ? true : undefined), "the kept instruction accepted");
    assert.deepEqual(
      commandMessages(pi).map((m) => m.content),
      ["请顺便更新 README"],
    );
    const seen = JSON.stringify(pi.modelCalls.map((c) => c.messages));
    assert.equal(seen.includes("再把日志清理掉"), false, "the withdrawn instruction never reached Pi's model");

    // The owner speaks once the persona has answered the notice of that run (YesImBot skips a
    // message that arrives mid-turn, by default).
    await world.model.request((r) => newEvents(r).includes('"task": "请顺便更新 README"'), "the persona's turn for the instruction's run");
    await world.untilIdle();

    // Past the cut-off the refusal, with its reason, is what the persona reads back.
    const again = "把第一条也撤回吧";
    world.model.when(ownerSaid(again), reply([act("agent_command_cancel", { session_id: sessionId, command_id: kept })], true));
    await world.say("dm", again);
    const refusal = await world.model.request((r) => resultOf("agent_command_cancel")(r) && promptText(r).includes(again), "the late cancel's result");
    const refused = observation(refusal, "agent_command_cancel") ?? "";
    assert.ok(refused.includes("<status>error</status>"), refused);
    assert.ok(refused.includes("already_accepted") && refused.includes("Pi 已经接收该指令，不能撤回"), refused);
  });
  test("the owner's reply quoting an approval request is their answer, not chat: the approval is decided and YesImBot is not stirred by it", async (t) => {
    const world = await startWorld(t);
    // notify-webhook applied again once YesImBot's middleware is in place, so that Koishi's order
    // of registration alone would hand the owner's message to YesImBot first.
    await world.untilIdle();
    world.koishi.app.registry.get(notifyWebhook as never)!.restart();
    await waitUntil(async () => ((await call(world.koishi, "GET", "/health")).status === 200 ? true : undefined), "notify-webhook answering again");
    await agentApi(world.koishi).heartbeat();
    const created = await call(world.koishi, "POST", "/approvals", approvalRequestOf());
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const { approval_id: id, code } = created.body.approval as { approval_id: string; code: string };
    // The bot's sends are numbered from 1 as they happen (`sent-N`).
    const position = await waitUntil(() => {
      const index = world.sent.findIndex(([channel, text]) => channel === OWNER_CHAT && text.includes(code));
      return index < 0 ? undefined : index + 1;
    }, "the request reached the owner's private chat");
    const ownerMessages = () => world.stimuli.filter((s) => (s as { type: string }).type === "user_message").length;

    await world.say("dm", `<quote id="sent-${position}"/>同意`);
    const decided = await waitUntil(async () => {
      const { body } = await call(world.koishi, "GET", "/operator/approvals?state=all", undefined, OPERATOR_TOKEN);
      return (body.approvals as { approval_id: string; state: string; via: string }[]).find((a) => a.approval_id === id && a.state === "decided");
    }, "the approval decided from the reply");
    assert.equal(decided.via, "chat");
    assert.equal(ownerMessages(), 0, "YesImBot never took the answer as a message to reply to");

    // Anything else the owner writes is still YesImBot's.
    await world.say("dm", "谢谢，就这样");
    assert.equal(ownerMessages(), 1);
  });
});
