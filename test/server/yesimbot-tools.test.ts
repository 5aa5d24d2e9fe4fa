import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import type { Context, Plugin, Session } from "koishi";
import type { CommandSummary } from "../../protocol/queue.ts";
import { OperatorCommandCreated } from "../../protocol/operator.ts";
import type { SessionProjection } from "../../protocol/sessions.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { agentApi, call, startServer } from "../../harness/agent-api.ts";
import { imageOf } from "./images.ts";
import { StandInToolService } from "./yesimbot-tool-standin.ts";

const MockBot = createRequire(import.meta.url)("@koishijs/plugin-mock").default as Plugin<Context>;
const OWNER = "10001";

function startWithYesImBot(): Promise<KoishiHarness> {
  return startServer({
    config: { botId: "mock:514", recipientId: OWNER },
    plugins: (use) => {
      use(MockBot, { selfId: "514" });
      use(StandInToolService as unknown as Plugin<Context>);
    },
  });
}

function tools(server: KoishiHarness): StandInToolService {
  return server.app["yesimbot.tool"] as unknown as StandInToolService;
}

/** A synthetic chat session on the mock bot, like the ones YesImBot v3 runs its turns on. */
function chat(server: KoishiHarness, kind: "owner-dm" | "owner-in-group" | "stranger-dm"): Session {
  const bot = server.app.bots["mock:514"]!;
  const userId = kind === "stranger-dm" ? "20002" : OWNER;
  const channel = kind === "owner-in-group" ? { id: "group-1", type: 0 } : { id: `private:${userId}`, type: 1 };
  return bot.session({
    type: "message",
    timestamp: Date.now(),
    channel,
    ...(kind === "owner-in-group" ? { guild: { id: "group-1" } } : {}),
    user: { id: userId },
  });
}

async function postNotice(server: KoishiHarness, eventId: string, sessionId: string) {
  const answer = await call(server, "POST", "/events", {
    event_id: eventId,
    session_id: sessionId,
    source: "Pi Agent · demo",
    task: "fix the tests",
    status: "completed",
    summary: "done",
    created_at: new Date().toISOString(),
  });
  assert.equal(answer.status, 202);
}

// Listing per chat, refusal from a group, and YesImBot reloads run against the real YesImBot in
// test/persona/yesimbot-real.test.ts; this covers the tool's own second check.
test("a call without a session, or from any chat but the owner's private one, is refused by the tool itself", async (t) => {
  const server = await startWithYesImBot();
  t.after(() => server.stop());
  const service = tools(server);
  for (const kind of ["owner-in-group", "stranger-dm"] as const) {
    const definition = service.tools.get("agent_sessions")!;
    const answer = await definition.execute({ session: chat(server, kind) });
    assert.deepEqual([answer.status, answer.error?.name], ["error", "forbidden"], kind);
  }
  // YesImBot skips isSupported for calls without a session.
  const sessionless = await service.invoke("agent_sessions", {});
  assert.deepEqual([sessionless.status, sessionless.error?.name], ["error", "forbidden"]);
});

test("agent_sessions and agent_session_message: online sessions only, idempotent within a turn", async (t) => {
  const server = await startWithYesImBot();
  t.after(() => server.stop());
  const service = tools(server);
  const agent = agentApi(server);
  await agent.heartbeat({ state: "running" });

  const turn = chat(server, "owner-dm");
  const listed = await service.invoke("agent_sessions", {}, turn);
  assert.equal(listed.status, "success");
  const sessions = (listed.result as { sessions: SessionProjection[] }).sessions;
  assert.deepEqual(
    sessions.map((s) => [s.session_id, s.state]),
    [["s-1", "running"]],
  );

  const offline = await service.invoke("agent_session_message", { session_id: "s-gone", content: "hello" }, turn);
  assert.equal(offline.status, "error");
  assert.equal(offline.error?.name, "session_offline");
  assert.match(offline.error?.message ?? "", /不在线/);

  const params = { session_id: "s-1", content: "请顺便更新 README", images: [imageOf("image/png", 128)] };
  const sent = await service.invoke("agent_session_message", params, turn);
  assert.equal(sent.status, "success", JSON.stringify(sent.error));
  const created = OperatorCommandCreated.parse(sent.result);
  assert.deepEqual([created.command.origin, created.command.state, created.command.cancellable, created.duplicate], ["proactive", "pending", true, false]);
  assert.match(created.command.event_id, /^proactive:c-/);

  const retried = await service.invoke("agent_session_message", params, turn);
  assert.deepEqual(OperatorCommandCreated.parse(retried.result), { ...created, duplicate: true }, "the same call in the same turn is one command");
  const nextTurn = await service.invoke("agent_session_message", params, chat(server, "owner-dm"));
  assert.notEqual(OperatorCommandCreated.parse(nextTurn.result).command.command_id, created.command.command_id, "a new turn is a new request");

  const claimed = await agent.claim();
  assert.equal(claimed.body.command.instruction, "请顺便更新 README");
  assert.equal(claimed.body.command.images.length, 1);
});

test("agent_command answers a notice of that session, even while the session is offline", async (t) => {
  const server = await startWithYesImBot();
  t.after(() => server.stop());
  const service = tools(server);
  await postNotice(server, "pi:s-1:run:1", "s-1");
  const turn = chat(server, "owner-dm");

  const ok = await service.invoke("agent_command", { event_id: "pi:s-1:run:1", session_id: "s-1", instruction: "再跑一次测试" }, turn);
  assert.equal(ok.status, "success", JSON.stringify(ok.error));
  const created = OperatorCommandCreated.parse(ok.result);
  assert.deepEqual([created.command.origin, created.command.event_id, created.command.state], ["anon", "pi:s-1:run:1", "pending"]);

  const cases: [string, Record<string, unknown>, string][] = [
    ["a notice of another session", { event_id: "pi:s-1:run:1", session_id: "s-2", instruction: "x" }, "event_session_mismatch"],
    ["an unknown notice", { event_id: "pi:nope", session_id: "s-1", instruction: "x" }, "not_found"],
    ["an empty instruction", { event_id: "pi:s-1:run:1", session_id: "s-1", instruction: "" }, "invalid_request"],
    ["a bad id", { event_id: "pi:s-1:run:1", session_id: "s 1", instruction: "x" }, "invalid_request"],
  ];
  for (const [name, params, error] of cases) {
    const answer = await service.invoke("agent_command", params, turn);
    assert.equal(answer.status, "error", name);
    assert.equal(answer.error?.name, error, name);
  }
  // Schema validation by YesImBot itself: a required parameter missing never reaches the tool.
  const missing = await service.invoke("agent_command", { session_id: "s-1", instruction: "x" }, turn);
  assert.equal(missing.status, "error");
  assert.match(missing.error?.message ?? "", /Parameter validation failed/);
});

test("agent_commands and agent_command_cancel follow the cut-off at delivery", async (t) => {
  const server = await startWithYesImBot();
  t.after(() => server.stop());
  const service = tools(server);
  const agent = agentApi(server);
  await agent.heartbeat();
  const turn = chat(server, "owner-dm");
  const send = async (content: string) =>
    OperatorCommandCreated.parse((await service.invoke("agent_session_message", { session_id: "s-1", content }, turn)).result).command.command_id;
  const delivered = await send("第一条");
  const withdrawn = await send("第二条");

  const claimed = await agent.claim();
  assert.equal(claimed.body.command.command_id, delivered);

  const cancelled = await service.invoke("agent_command_cancel", { session_id: "s-1", command_id: withdrawn }, turn);
  assert.equal(cancelled.status, "success");
  assert.equal((cancelled.result as { command: CommandSummary }).command.state, "cancelled");
  const again = await service.invoke("agent_command_cancel", { session_id: "s-1", command_id: withdrawn }, turn);
  assert.equal(again.status, "success", "cancelling twice is harmless");

  const late = await service.invoke("agent_command_cancel", { session_id: "s-1", command_id: delivered }, turn);
  assert.deepEqual([late.status, late.error?.name], ["error", "delivery_started"]);
  await agent.ack(delivered, claimed.body.lease.token);
  const accepted = await service.invoke("agent_command_cancel", { session_id: "s-1", command_id: delivered }, turn);
  assert.deepEqual([accepted.status, accepted.error?.name], ["error", "already_accepted"]);

  await agent.offline("s-1", "r-1");
  const listed = await service.invoke("agent_commands", { session_id: "s-1", limit: 1 }, turn);
  assert.equal(listed.status, "success", "listing works for an offline session");
  const commands = (listed.result as { commands: CommandSummary[] }).commands;
  assert.deepEqual(
    commands.map((c) => [c.command_id, c.state, c.cancellable]),
    [[withdrawn, "cancelled", false]],
  );
  const other = await service.invoke("agent_commands", { session_id: "s-other" }, turn);
  assert.deepEqual(other.result, { commands: [] });
});
