import { test } from "node:test";
import assert from "node:assert/strict";
import type { Context, Plugin, Session } from "koishi";
import { AuditPage, type AuditEntry } from "../../protocol/audit.ts";
import { auditData, imageFacts } from "../../server/audit/redaction-rules.ts";
import { AUDIT_TABLE, retentionCutoff } from "../../server/audit/store.ts";
import { formatDirectMessage } from "../../server/handover/direct.ts";
import { EventBody } from "../../protocol/events.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { OPERATOR_TOKEN, agentApi, call, operatorApi, startServer } from "../../harness/agent-api.ts";
import { settledReceipt, validEvent } from "../../harness/event-client.ts";
import { imageOf } from "./images.ts";
import { withPersona, worldState } from "./persona-standin.ts";
import { StandInToolService } from "./yesimbot-tool-standin.ts";
import { waitUntil } from "../../harness/wait.ts";
import { zh } from "./say.ts";

const OWNER = "10001";
const DAY_MS = 24 * 60 * 60 * 1000;

async function auditPage(server: KoishiHarness, query: Record<string, string> = {}): Promise<AuditPage> {
  const answer = await operatorApi(server).audit(query);
  assert.equal(answer.status, 200, JSON.stringify(answer.body));
  return AuditPage.parse(answer.body);
}

function ownerChat(server: KoishiHarness): Session {
  return server.app.bots["mock:514"]!.session({ type: "message", timestamp: Date.now(), channel: { id: `private:${OWNER}`, type: 1 }, user: { id: OWNER } });
}

test("imageFacts and auditData keep counts, sizes and digests, drop secret-named keys and cut long strings", () => {
  const image = imageOf("image/png", 64, 1);
  const facts = imageFacts([image]);
  assert.equal(facts.count, 1);
  assert.equal(facts.bytes, Buffer.from(image.data, "base64").length);
  assert.match(facts.sha256[0]!, /^[0-9a-f]{64}$/);
  const cleaned = auditData({
    images: [image],
    lease_token: "secret-lease",
    nested: { operatorToken: "x", authorization: "Bearer y", text: "a".repeat(20_000) },
  }) as Record<string, any>;
  assert.deepEqual(cleaned.images, facts);
  assert.equal("lease_token" in cleaned, false);
  assert.deepEqual(Object.keys(cleaned.nested), ["text"]);
  assert.equal(cleaned.nested.text.length, 16_001);
  const kept = auditData({ context_usage: { used_tokens: 48_000, context_window: 200_000 }, max_tokens: 1, tokenizer: "x" }) as Record<string, unknown>;
  assert.deepEqual(kept, { context_usage: { used_tokens: 48_000, context_window: 200_000 }, max_tokens: 1, tokenizer: "x" }, "token counts are not secrets");
  assert.equal(retentionCutoff(Date.parse("2026-11-30T00:00:00Z"), 30).toISOString(), "2026-10-31T00:00:00.000Z");
});

test("every kind of action leaves an audit row with its inputs and acting side, and no token anywhere", async (t) => {
  const server = await startServer({
    config: { botId: "mock:514", recipientId: OWNER, injectRetryDelayMs: 10 },
    plugins: (use) => {
      withPersona(use);
      use(StandInToolService as unknown as Plugin<Context>);
    },
  });
  t.after(() => server.stop());
  const agent = agentApi(server);
  const operator = operatorApi(server);
  await agent.heartbeat({ state: "running" });

  // An event handed to the persona, and one sent directly.
  const notice = validEvent({ session_id: "s-1", summary: "测试失败 2 个" });
  assert.equal((await call(server, "POST", "/events", notice)).status, 202);
  await settledReceipt(server, String(notice.event_id));
  const direct = validEvent({ session_id: "s-1", delivery: "direct" });
  assert.equal((await call(server, "POST", "/events", direct)).status, 202);
  await settledReceipt(server, String(direct.event_id));

  // An operator request with an image, then the command's life: leased, accepted; another cancelled.
  const image = imageOf("image/png", 128, 7);
  const created = await operator.create({ session_id: "s-1", instruction: "看看这张截图", images: [image] });
  assert.equal(created.status, 201);
  const claimed = await agent.claim();
  assert.equal((await agent.ack(claimed.body.command.command_id, claimed.body.lease.token)).status, 200);
  const second = await operator.create({ session_id: "s-1", instruction: "算了" });
  assert.equal((await operator.cancel(second.body.command.command_id)).status, 200);

  // A persona tool call in the owner's private chat.
  const tools = server.app["yesimbot.tool"] as unknown as StandInToolService;
  const sent = await tools.invoke("agent_session_message", { session_id: "s-1", content: "继续" }, ownerChat(server));
  assert.equal(sent.status, "success");
  // A call YesImBot makes without a chat session is refused by the tool, and still recorded.
  assert.equal((await tools.invoke("agent_sessions", {})).status, "error");

  const entries = await waitUntil(async () => {
    const page = await auditPage(server, { session_id: "s-1", limit: "200" });
    return page.entries.some((e) => e.action === "event.sent_direct") ? page.entries : undefined;
  }, "all rows written");
  const find = (action: string, predicate: (e: AuditEntry) => boolean = () => true) => {
    const entry = entries.find((e) => e.action === action && predicate(e));
    assert.ok(entry, `a ${action} row`);
    return entry;
  };

  const accepted = find("event.accepted", (e) => e.subject === notice.event_id);
  assert.equal(accepted.actor, "agent");
  assert.equal((accepted.data.event as { summary: string }).summary, "测试失败 2 个");
  assert.deepEqual((accepted.data.event as { context_usage: unknown }).context_usage, notice.context_usage, "the whole body, token counts included");

  const handed = find("event.handed_to_persona", (e) => e.subject === notice.event_id);
  assert.equal(handed.actor, "server");
  const block = worldState(server).recorded.find((r) => r.message.includes(String(notice.event_id)))!.message;
  assert.equal(handed.data.text, block, "the exact text the persona got");
  assert.deepEqual(handed.data.outcome, { kind: "injected" });

  const sentDirect = find("event.sent_direct", (e) => e.subject === direct.event_id);
  assert.equal(sentDirect.data.text, formatDirectMessage(EventBody.parse(direct), zh), "the exact text of the direct message");

  const request = find(
    "operator.request",
    (e) => e.data.path === "/operator/commands" && (e.data.body as { instruction?: string }).instruction === "看看这张截图",
  );
  assert.equal(request.actor, "operator");
  assert.equal(request.data.status, 201);
  const images = (request.data.body as { images: { count: number; bytes: number; sha256: string[] } }).images;
  assert.deepEqual(images, imageFacts([image]));

  const commandId = created.body.command.command_id;
  const lifecycle = entries.filter((e) => e.subject === commandId && e.action.startsWith("command.")).reverse();
  assert.deepEqual(
    lifecycle.map((e) => [e.action, e.actor]),
    [
      ["command.pending", "operator"],
      ["command.leased", "agent"],
      ["command.accepted", "agent"],
    ],
  );
  assert.equal(lifecycle[0]!.data.image_count, 1);
  assert.equal(lifecycle[0]!.data.instruction, "看看这张截图");
  assert.equal(find("command.cancelled", (e) => e.subject === second.body.command.command_id).actor, "operator");

  const tool = find("persona.agent_session_message");
  assert.equal(tool.actor, "persona");
  // YesImBot's Schema fills the absent images with an empty list before the tool sees the call.
  assert.deepEqual(tool.data.input, { session_id: "s-1", content: "继续", images: { count: 0, bytes: 0, sha256: [] } });
  assert.deepEqual(tool.data.chat, { user_id: OWNER, channel_id: `private:${OWNER}`, direct: true });
  assert.equal(find("command.pending", (e) => e.data.instruction === "继续").actor, "persona");
  const refused = (await auditPage(server, { limit: "200" })).entries.find((e) => e.action === "persona.agent_sessions");
  assert.deepEqual([refused?.data.status, (refused?.data.error as { name?: string } | null)?.name, refused?.data.chat], ["error", "forbidden", null]);

  const everything = JSON.stringify((await auditPage(server, { limit: "200" })).entries);
  for (const secret of [server.token, OPERATOR_TOKEN, claimed.body.lease.token, image.data]) {
    assert.equal(everything.includes(secret), false, "no token, lease token or image bytes in the trail");
  }
});

test("the audit query is newest first, filtered by session and time, and pages with next_before", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const ids: string[] = [];
  for (let i = 0; i < 5; i++) {
    const event = validEvent({ session_id: i % 2 ? "s-odd" : "s-even", event_id: `pi:audit:${i}` });
    ids.push(String(event.event_id));
    assert.equal((await call(server, "POST", "/events", event)).status, 202);
  }
  const accepted = async (query: Record<string, string>) =>
    (await auditPage(server, query)).entries.filter((e) => e.action === "event.accepted").map((e) => e.subject);
  assert.deepEqual(await accepted({ session_id: "s-even" }), ["pi:audit:4", "pi:audit:2", "pi:audit:0"]);

  const first = await auditPage(server, { session_id: "s-odd", limit: "1" });
  assert.equal(first.entries.length, 1);
  assert.ok(first.next_before);
  const rest = await auditPage(server, { session_id: "s-odd", before: String(first.next_before) });
  assert.ok(rest.entries.every((e) => e.id < first.next_before!));
  assert.ok(rest.entries.some((e) => e.subject === "pi:audit:1"));

  assert.deepEqual(await accepted({ since: new Date(Date.now() + 60_000).toISOString() }), []);
  const bads: Record<string, string>[] = [{ limit: "201" }, { since: "yesterday" }, { session_id: "a b" }, { other: "x" }];
  for (const bad of bads) {
    assert.equal((await operatorApi(server).audit(bad)).status, 400, JSON.stringify(bad));
  }
  assert.equal((await operatorApi(server, server.token).audit()).status, 401, "the agents' token does not open it");
});

test("rows older than the retention are pruned, younger ones kept", async (t) => {
  const server = await startServer({ config: { auditRetentionDays: 30 } });
  t.after(() => server.stop());
  const now = Date.now();
  for (const [age, subject] of [
    [31, "old"],
    [29, "young"],
  ] as const) {
    await server.app.database.create(AUDIT_TABLE, {
      at: new Date(now - age * DAY_MS),
      actor: "server",
      action: "test.row",
      session_id: "s-r",
      subject,
      data: {},
    });
  }
  const subjects = async () => (await auditPage(server, { session_id: "s-r" })).entries.filter((e) => e.action === "test.row").map((e) => e.subject);
  assert.deepEqual(await subjects(), ["young", "old"]);
  // Pruning runs at every start (and hourly); a restart is the start of a new process.
  await server.restart();
  assert.deepEqual(await subjects(), ["young"]);
});
