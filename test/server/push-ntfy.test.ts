/**
 * The ntfy push route on a real Koishi app (SQLite, plugin-server on loopback) against a loopback
 * fake ntfy that implements the JSON publish API with bearer auth and presses buttons as the phone
 * does: what is pushed at which priority, Approve and Deny as single-use capability URLs, the
 * receipts (a 429 retried after its delay), and the push's text against generated agent text.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import fc from "fast-check";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call, operatorApi, startServer } from "../../harness/agent-api.ts";
import { postEvent, validEvent } from "../../harness/event-client.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { EventBody } from "../../protocol/events.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { closingText, voiceOf } from "../../server/approvals/message-rules.ts";
import { pushConfigProblem } from "../../server/push/config-rules.ts";
import { PRESS_LIMIT } from "../../server/push/routes.ts";
import { approvalPush, eventPush } from "../../server/push/render-rules.ts";
import { startFakeNtfy, type FakeNtfy, type Published } from "../helpers/fake-ntfy.ts";
import { record } from "./approval-fixtures.ts";
import { sayIn, zh } from "./say.ts";

const en = sayIn("en-US");

async function pushServer(t: TestContext, options: { publicUrl?: boolean; config?: Record<string, unknown> } = {}) {
  const ntfy = await startFakeNtfy();
  t.after(() => ntfy.stop());
  const config = { ntfyUrl: ntfy.url, ntfyTopic: ntfy.topic, ntfyToken: ntfy.token, pushRetryDelayMs: 20, ...options.config };
  const server = await startServer({ config });
  t.after(() => server.stop());
  // The public base URL names this server's own port, known once it listens.
  if (options.publicUrl ?? true) await server.restart({ publicUrl: new URL(server.baseUrl).origin });
  await agentApi(server).heartbeat();
  return { ntfy, server };
}

async function requestApproval(server: KoishiHarness, overrides: Parameters<typeof approvalRequestOf>[0] = {}) {
  const created = await call(server, "POST", "/approvals", approvalRequestOf(overrides));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body.approval as { approval_id: string; code: string; expires_at: string };
}

const pushOf = (ntfy: FakeNtfy, text: string) => waitUntil(() => ntfy.published.find((p) => p.title?.includes(text)), `a push titled with ${text}`);
const approvalOf = async (server: KoishiHarness, id: string) =>
  (await call(server, "GET", `/operator/approvals/${id}`, undefined, OPERATOR_TOKEN)).body.approval;
const button = (push: Published, label: string) => push.actions!.find((a) => a.label === label)!;

test("an approval request is pushed at top priority with Approve and Deny; Approve decides exactly that call via ntfy, once", async (t) => {
  const { ntfy, server } = await pushServer(t);
  const approval = await requestApproval(server);
  const push = await pushOf(ntfy, approval.code);
  assert.equal(push.priority, 5);
  assert.deepEqual(push.tags, ["warning", "lock"]);
  assert.deepEqual(push.extra, {}, "no click, attachment, icon or markdown");
  assert.ok(
    ntfy.requests.every((r) => r.authorization === `Bearer ${ntfy.token}`),
    "bearer auth on every publish",
  );
  assert.match(push.message!, /┃ rm -rf build/);
  assert.deepEqual(
    push.actions!.map((a) => [a.action, a.label, a.method, new URL(a.url).origin]),
    [
      ["http", "批准", "POST", new URL(server.baseUrl).origin],
      ["http", "拒绝", "POST", new URL(server.baseUrl).origin],
    ],
  );
  const [approve, deny] = push.actions!;
  assert.notEqual(approve!.url, deny!.url);
  assert.match(approve!.url, new RegExp(`${API_BASE_PATH}/push/answer/[A-Za-z0-9_-]{43}$`));

  assert.deepEqual(await ntfy.press(approve!), { status: 200, body: { code: approval.code, decision: "approved", state: "decided" } });
  const decided = await approvalOf(server, approval.approval_id);
  assert.deepEqual([decided.state, decided.decision, decided.decided_by, decided.via], ["decided", "approved", "ntfy", "ntfy"]);
  // The decision goes to the waiting runtime bound to exactly the requested call.
  const { body } = await agentApi(server).claim("s-1", "r-1", { lane: "control" });
  assert.deepEqual(body.command.payload, {
    approval_id: approval.approval_id,
    decision: "approved",
    reason: null,
    binding: { tool_call_id: "call-1", args_digest: "a".repeat(64), cwd: "/home/u/proj" },
    via: "ntfy",
  });

  assert.deepEqual(await ntfy.press(approve!), { status: 404, body: { error: "not_found" } }, "a used URL is unknown");
  const late = await ntfy.press(deny!);
  assert.equal(late.status, 409, "someone answered first");
  assert.equal((late.body as { error: string }).error, "already_decided");
  const forged = { ...approve!, url: approve!.url.replace(/[^/]+$/, randomBytes(32).toString("base64url")) };
  assert.equal((await ntfy.press(forged)).status, 404, "a forged capability");
  assert.equal((await ntfy.press({ ...approve!, url: approve!.url.replace(/[^/]+$/, "short") })).status, 404);
  assert.equal((await approvalOf(server, approval.approval_id)).decision, "approved", "nothing changed after the first answer");
  // A capability opens nothing else: it is no bearer token.
  const capability = approve!.url.split("/").at(-1)!;
  assert.equal((await call(server, "GET", "/operator/approvals", undefined, capability)).status, 401);

  const audit = (await operatorApi(server).audit({ limit: "200" })).body.entries as { action: string; data: Record<string, unknown> }[];
  const decidedRows = audit.filter((e) => e.action === "approval.decided");
  assert.deepEqual(
    decidedRows.map((e) => [e.data.via, e.data.by]),
    [["ntfy", "ntfy"]],
  );
  assert.ok(audit.some((e) => e.action === "approval.refused" && e.data.via === "ntfy" && e.data.error === "already_decided"));
  assert.ok(audit.some((e) => e.action === "push.delivered"));
  assert.ok(!JSON.stringify(audit).includes(capability), "no capability on the audit trail");
});

test("Deny refuses the call; a press after the approval's time is refused and changes nothing", async (t) => {
  const { ntfy, server } = await pushServer(t);
  const denied = await requestApproval(server);
  const push = await pushOf(ntfy, denied.code);
  assert.equal((await ntfy.press(button(push, "拒绝"))).status, 200);
  assert.deepEqual(((await approvalOf(server, denied.approval_id)) as { decision: string; via: string }).decision, "rejected");

  const short = await requestApproval(server, { tool_call_id: "call-2", args_digest: "b".repeat(64), expires_at: new Date(Date.now() + 1500).toISOString() });
  const second = await pushOf(ntfy, short.code);
  await waitUntil(() => Date.now() > new Date(short.expires_at).getTime(), "the approval's time is over", 5000);
  assert.deepEqual(await ntfy.press(button(second, "批准")), { status: 404, body: { error: "not_found" } });
  assert.equal((await approvalOf(server, short.approval_id)).state, "pending", "the late press changed nothing");
});

test("without a public base URL the push says how to answer and carries no answer buttons", async (t) => {
  const { ntfy, server } = await pushServer(t, { publicUrl: false });
  const approval = await requestApproval(server);
  const push = await pushOf(ntfy, approval.code);
  assert.deepEqual(
    push.actions,
    [{ action: "view", label: "打开控制台", url: `${new URL(server.baseUrl).origin}/anon-notify` }],
    "no http buttons: a link to the console",
  );
  assert.match(push.message!, new RegExp(`anon\\.approve ${approval.code}`));
  const health = await call(server, "GET", "/health");
  assert.deepEqual(health.body.push.route, "ntfy");
  assert.equal(health.body.push.answers, "text");
});

test("what is pushed is the server's choice: needs-you high, a failure at default, completions only when chosen", async (t) => {
  const { ntfy, server } = await pushServer(t, { publicUrl: false });
  const needsYou = validEvent({ status: "warning", summary: "Pi 等你回答一个确认框", details: { needs_you: true } });
  const failed = validEvent({ status: "failed", summary: "测试挂了" });
  const completed = validEvent({ status: "completed" });
  for (const event of [completed, needsYou, failed]) assert.equal((await postEvent(server, event)).status, 202);
  await waitUntil(() => ntfy.published.length >= 2 && ntfy.published, "two pushes");
  const byEvent = (id: unknown) => ntfy.published.find((p) => p.message?.includes(String(id)));
  assert.equal(byEvent(needsYou.event_id)?.priority, 4);
  assert.deepEqual(byEvent(needsYou.event_id)?.tags, ["warning"]);
  assert.equal(byEvent(failed.event_id)?.priority, 3);
  const receipt = await waitUntil(async () => {
    const { body } = await call(server, "GET", `/events/${encodeURIComponent(String(failed.event_id))}`);
    return body.push?.state === "delivered" && body;
  }, "the failure's push receipt");
  assert.equal(receipt.push.attempts, 1);
  assert.equal((await call(server, "GET", `/events/${encodeURIComponent(String(completed.event_id))}`)).body.push, null, "completions stay quiet by default");
  assert.equal(byEvent(completed.event_id), undefined);
});

test("an ntfy 429 is retried after its delay and the receipt says so; a refusal is a failed receipt with its cause", async (t) => {
  const { ntfy, server } = await pushServer(t, { publicUrl: false });
  ntfy.rateLimit(1);
  const failed = validEvent({ status: "failed", summary: "构建失败" });
  await postEvent(server, failed);
  const receipt = await waitUntil(async () => {
    const { body } = await call(server, "GET", `/events/${encodeURIComponent(String(failed.event_id))}`);
    return body.push?.state === "delivered" && body.push;
  }, "the push delivered after the 429");
  assert.equal(receipt.attempts, 2);
  assert.deepEqual(
    ntfy.requests.map((r) => r.status),
    [429, 200],
  );
  const audit = (await operatorApi(server).audit({ limit: "200" })).body.entries as { action: string; data: Record<string, unknown> }[];
  const retrying = audit.find((e) => e.action === "push.retrying");
  assert.match(String(retrying?.data.error), /^ntfy_rate_limited: ntfy 限流了（HTTP 429 limit reached: too many requests, please be nice），1 秒后重试$/);
  const delay = Number(retrying?.data.delay_ms);
  assert.ok(delay >= 10 && delay <= 20, `the configured backoff, with jitter: ${delay}`);

  ntfy.fail(1, 403);
  const second = validEvent({ status: "failed", summary: "又失败了" });
  await postEvent(server, second);
  const refused = await waitUntil(async () => {
    const { body } = await call(server, "GET", `/events/${encodeURIComponent(String(second.event_id))}`);
    return body.push?.state === "failed" && body;
  }, "the refused push's receipt");
  assert.match(refused.push.error, /^ntfy_refused: ntfy 拒收（HTTP 403 fault injected），不再重试/);
  assert.equal(refused.push.attempts, 1);
  assert.notEqual(refused.state, "failed", "the notice's own route is untouched by the push's refusal");
  const health = await call(server, "GET", "/health");
  assert.equal(health.body.push.last.state, "failed");
});

/** Agent-made text: any code points, line breaks, bidi controls, zero-width characters and markup-looking runs. */
const agentText = fc.oneof(
  fc.string({ unit: "grapheme", maxLength: 300 }),
  fc.string({
    unit: fc.constantFrom("\n", "\r", "\u2028", "\u2029", "\u0085", "\u202e", "\u2066", "\u200b", "\t", "\v", "*", "[", "](", "<b>", "a", "批"),
    maxLength: 200,
  }),
  fc.string({ unit: "binary", maxLength: 200 }),
);
const BREAKS = /[\r\u2028\u2029\u0085\v\f\u202a-\u202e\u2066-\u2069\u200b-\u200f]/u;

test("the push text carries no agent-made line breaks, invisible characters or markup, whatever the agent writes", () => {
  const plan = { priority: 3 as const, tags: [] };
  for (const say of [zh, en]) {
    fc.assert(
      fc.property(agentText, agentText, agentText, (source, task, summary) => {
        const event = EventBody.parse({
          ...validEvent({ status: "failed" }),
          source: source.slice(0, 120),
          task: task.slice(0, 200),
          summary: summary.slice(0, 1200),
        });
        const push = eventPush(event, plan, say);
        const lines = push.message.split("\n");
        assert.equal(lines.length, 4, push.message);
        assert.doesNotMatch(push.message, BREAKS);
        assert.doesNotMatch(push.title, BREAKS);
        assert.ok(Buffer.byteLength(push.message) <= 4000);
        assert.deepEqual(
          lines.map((line) => line.split(/[:：]/)[0]),
          say === zh ? ["来源", "任务", "摘要", "事件"] : ["Source", "Task", "Summary", "Event"],
        );
      }),
      { numRuns: 150 },
    );
    fc.assert(
      fc.property(agentText, agentText, agentText, (command, cwd, reason) => {
        const row = record({ command: command || "x", cwd: `/p/${cwd || "x"}`, reason, source: "ask_approval", action: reason.slice(0, 40) || "x" });
        const push = approvalPush(row, new Date(row.expires_at.getTime() - 60_000), voiceOf(say), { answer: { approve: "https://a/1", deny: "https://a/2" } });
        assert.doesNotMatch(push.message, BREAKS);
        const lines = push.message.split("\n");
        assert.equal(lines.length, reason ? 7 : 6, push.message);
        assert.ok(lines[2]!.startsWith("┃ "), "the command stays on its one line");
        assert.deepEqual(
          push.actions!.map((a) => a.url),
          ["https://a/1", "https://a/2"],
        );
      }),
      { numRuns: 150 },
    );
  }
});

test("the chat's closing message says the push answered", () => {
  for (const [say, words] of [
    [zh, "已在手机推送上批准"],
    [en, "approved on the phone push"],
  ] as const) {
    const text = closingText(record({ state: "approved", decision: "approved", via: "ntfy", decided_by: "ntfy", request_sent: true }), voiceOf(say));
    assert.ok(text.includes(words), text);
  }
});

test("a push setting that cannot work stops the plugin with what is wrong, never the token", () => {
  const base = { ntfyUrl: "", ntfyTopic: "", ntfyToken: "tk_secret", publicUrl: "", feishuWebhook: "", feishuSecret: "" };
  const table: [string, Partial<typeof base>, string | null][] = [
    ["off", {}, null],
    ["on", { ntfyUrl: "https://ntfy.sh", ntfyTopic: "pi_owner-1" }, null],
    ["a path prefix", { ntfyUrl: "https://example.com/ntfy", ntfyTopic: "t" }, null],
    ["only the URL", { ntfyUrl: "https://ntfy.sh" }, "half"],
    ["only the topic", { ntfyTopic: "t" }, "half"],
    ["not http", { ntfyUrl: "ftp://ntfy.sh", ntfyTopic: "t" }, "url"],
    ["credentials in the URL", { ntfyUrl: "https://u:p@ntfy.sh", ntfyTopic: "t" }, "url"],
    ["a topic with a slash", { ntfyUrl: "https://ntfy.sh", ntfyTopic: "a/b" }, "topic"],
    ["a topic too long", { ntfyUrl: "https://ntfy.sh", ntfyTopic: "x".repeat(65) }, "topic"],
    ["a public URL with a query", { publicUrl: "https://pi.example.com/?a=1" }, "public-url"],
    ["a Feishu webhook that is no URL", { feishuWebhook: "open.feishu.cn/hook" }, "feishu"],
  ];
  for (const [name, overrides, expected] of table) {
    const problem = pushConfigProblem({ ...base, ...overrides });
    assert.equal(problem?.key ?? null, expected, name);
    assert.ok(!JSON.stringify(problem).includes("tk_secret"), name);
  }
});

test("a flood of guessed answer URLs is held off in all before any lookup, without a token", async (t) => {
  const { server } = await pushServer(t, { publicUrl: true });
  const guess = () => fetch(`${new URL(server.baseUrl).origin}${API_BASE_PATH}/push/answer/${randomBytes(32).toString("base64url")}`, { method: "POST" });
  // The bucket refills one press a second, so a loaded machine may see a few more 404s first: never fewer than the burst.
  const statuses: number[] = [];
  for (let i = 0; i < PRESS_LIMIT.burst * 3 && !statuses.includes(429); i++) {
    const response = await guess();
    await response.arrayBuffer();
    statuses.push(response.status);
    if (response.status === 429) assert.ok(Number(response.headers.get("retry-after")) >= 1);
  }
  assert.equal(statuses.at(-1), 429, JSON.stringify(statuses));
  assert.ok(statuses.slice(0, -1).every((status) => status === 404) && statuses.length > PRESS_LIMIT.burst, JSON.stringify(statuses));
});
