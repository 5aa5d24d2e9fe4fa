/** The shared HTTP edge and the health/recipient routes on a real Koishi app. */
import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import type { Context } from "koishi";
import { HealthAnswer, RecipientAnswer } from "../../protocol/status.ts";
import { DomainError } from "../../common/domain-error.ts";
import { HttpApi, json } from "../../server/http/api.ts";
import { HTTP_STATUS } from "../../server/http/error-status.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { MockBot } from "./persona-standin.ts";

function get(koishi: KoishiHarness, path: string, token = koishi.token) {
  return fetch(`${koishi.baseUrl}${path}`, { headers: { authorization: `Bearer ${token}` } });
}

describe("health and recipient", () => {
  let koishi: KoishiHarness;
  before(async () => {
    koishi = await startKoishi({
      config: { sessionHeartbeatTimeoutMs: 45_000, botId: "mock:514", recipientId: "10001" },
      plugins: (use) => {
        use(MockBot, { selfId: "514" });
      },
    });
  });
  after(() => koishi.stop());

  test("health answers the protocol shape with the configured heartbeat timeout", async () => {
    const response = await get(koishi, "/health");
    assert.equal(response.status, 200);
    const health = HealthAnswer.parse(await response.json());
    assert.equal(health.session_heartbeat_timeout_ms, 45_000);
    assert.deepEqual(health.protocol, { events: 1, commands: 3 });
    for (const capability of ["events", "direct", "context_usage"]) assert.ok(health.capabilities.includes(capability), capability);
  });

  for (const [label, header] of [
    ["missing", undefined],
    ["wrong", "Bearer nope"],
    ["not bearer", "Basic abc"],
  ] as const) {
    test(`a ${label} token gets 401 unauthorized`, async () => {
      const response = await fetch(`${koishi.baseUrl}/health`, { headers: header ? { authorization: header } : {} });
      assert.equal(response.status, 401);
      assert.deepEqual(await response.json(), { error: "unauthorized" });
    });
  }

  test("recipient is unknown/not_checked when the bot has no friend list", async () => {
    const answer = RecipientAnswer.parse(await (await get(koishi, "/recipient")).json());
    assert.deepEqual(answer, { qq: "10001", anon_qq: "514", status: "unknown", reason: "not_checked" });
  });

  type Friend = { user?: { id: string } } | { id: string | number; name?: string };
  const friendLists: [string, () => Promise<{ data: Friend[] }>, string, string | null][] = [
    ["in the friend list", async () => ({ data: [{ user: { id: "20002" } }, { user: { id: "10001" } }] }), "ok", null],
    ["not in the friend list", async () => ({ data: [{ user: { id: "20002" } }] }), "not_added", "not_in_friend_list"],
    // OneBot's adapter yields plain users, not `{ user }`.
    [
      "in a plain-user friend list (OneBot)",
      async () => ({
        data: [
          { id: "20002", name: "b" },
          { id: "10001", name: "a" },
        ],
      }),
      "ok",
      null,
    ],
    ["in a plain-user friend list with a numeric id", async () => ({ data: [{ id: 10001 }] }), "ok", null],
    ["not in a plain-user friend list", async () => ({ data: [{ id: "20002", name: "b" }] }), "not_added", "not_in_friend_list"],
    ["friend list failing", async () => Promise.reject(new Error("timeout")), "unknown", "not_checked"],
  ];
  for (const [label, list, status, reason] of friendLists) {
    test(`recipient ${label} is ${status}`, async () => {
      const bot = koishi.app.bots["mock:514"]! as unknown as { getFriendList?: unknown };
      bot.getFriendList = list;
      try {
        const answer = RecipientAnswer.parse(await (await get(koishi, "/recipient")).json());
        assert.equal(answer.status, status);
        assert.equal(answer.reason, reason);
      } finally {
        delete bot.getFriendList;
      }
    });
  }

  test("an offline bot says unknown, not unreachable", async () => {
    const bot = koishi.app.bots["mock:514"]!;
    const status = bot.status;
    bot.status = 0;
    try {
      const answer = RecipientAnswer.parse(await (await get(koishi, "/recipient")).json());
      assert.deepEqual([answer.status, answer.reason], ["unknown", "bot_offline"]);
    } finally {
      bot.status = status;
    }
  });
});

describe("HttpApi on its own routes", () => {
  let koishi: KoishiHarness;
  let release: () => void = () => {};
  before(async () => {
    koishi = await startKoishi({
      withoutPlugin: true,
      plugins: (use) => {
        use({
          name: "edge-probe",
          inject: ["server"],
          apply(ctx: Context) {
            const api = new HttpApi({ agentToken: "agent-token", operatorToken: "" });
            release = api.holdUntilReady(ctx);
            api.route(ctx, { method: "POST", path: "/probe", auth: "agent", maxBytes: 16 }, (request) => json(200, { echo: request.body }));
            api.route(ctx, { method: "GET", path: "/boom", auth: "agent" }, () => {
              throw new Error("secret internal detail");
            });
            api.route(ctx, { method: "GET", path: "/teapot", auth: "agent" }, () => {
              throw new DomainError("delivery_started", { retryAfterSeconds: 2.2 });
            });
            api.route(ctx, { method: "GET", path: "/operator/x", auth: "operator" }, () => json(200, {}));
          },
        });
      },
    });
  });
  after(() => koishi.stop());

  function call(path: string, init: RequestInit = {}) {
    return fetch(`${koishi.baseUrl}${path}`, { ...init, headers: { authorization: "Bearer agent-token", ...init.headers } });
  }

  test("answers 503 not_ready with Retry-After until the state is loaded, but checks the token first", async () => {
    const early = await call("/probe", { method: "POST", body: "{}" });
    assert.equal(early.status, 503);
    assert.equal(early.headers.get("retry-after"), "1");
    assert.deepEqual(await early.json(), { error: "not_ready" });
    const stranger = await fetch(`${koishi.baseUrl}/probe`, { method: "POST", body: "{}" });
    assert.equal(stranger.status, 401);
    await stranger.arrayBuffer();

    release();
    const ready = await call("/probe", { method: "POST", body: '{"a":1}' });
    assert.equal(ready.status, 200);
    assert.deepEqual(await ready.json(), { echo: { a: 1 } });
  });

  test("the route's own byte limit holds", async () => {
    const response = await call("/probe", { method: "POST", body: JSON.stringify({ a: "x".repeat(20) }) });
    assert.equal(response.status, 413);
    assert.deepEqual(await response.json(), { error: "payload_too_large" });
  });

  test("an unexpected error is a bare 500 internal_error", async () => {
    const response = await call("/boom");
    assert.equal(response.status, 500);
    const text = await response.text();
    assert.equal(text, '{"error":"internal_error"}');
  });

  test("a DomainError answers its code's status, the code and a whole-second Retry-After", async () => {
    const response = await call("/teapot");
    assert.equal(response.status, 409);
    assert.equal(response.headers.get("retry-after"), "3");
    assert.deepEqual(await response.json(), { error: "delivery_started" });
  });

  test("operator routes are off without an operator token", async () => {
    const response = await call("/operator/x");
    assert.equal(response.status, 403);
    assert.deepEqual(await response.json(), { error: "operator_disabled" });
  });
});

test("every error code the protocol documents with a status has that status in the edge's one table", () => {
  const protocol = readFileSync(new URL("../../docs/protocol.md", import.meta.url), "utf8");
  const documented = [...protocol.matchAll(/`(\d{3}) (?:\{"error":"([a-z_]+)"|([a-z_]+)`)/g)].map((m) => [m[2] ?? m[3]!, Number(m[1])] as const);
  assert.ok(documented.length >= 10, `the protocol's error rows are read (${documented.length})`);
  for (const [code, status] of documented) assert.equal(HTTP_STATUS[code as keyof typeof HTTP_STATUS], status, code);
});
