/**
 * Without a `database` service the plugin still starts: every route answers 503
 * `service_missing` naming it (after the bearer check), the log says so once, and the routes come
 * up as soon as a driver loads, and go back to 503 (reported again, once) when it goes away.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { join } from "node:path";
import { ErrorAnswer } from "../../protocol/wire.ts";
import { validEvent } from "../../harness/event-client.ts";
import { captureLog, startKoishi, useDatabase, type Use } from "../../harness/koishi.ts";
import * as notifyWebhook from "../../server/notify-webhook.ts";
import { waitUntil } from "../../harness/wait.ts";

test("without a database every route answers 503 naming it, the log says so once, and a driver brings the routes up", async (t) => {
  const log = captureLog();
  t.after(log.stop);
  const server = await startKoishi({ database: "none", config: { operatorToken: "operator-token-for-missing-services" } });
  t.after(() => server.stop());
  const agent = { authorization: `Bearer ${server.token}` };
  const missingDatabase = (warning: string) => warning.includes("database") && warning.includes("@minatojs/driver-sqlite");

  await waitUntil(() => log.warnings().some(missingDatabase), "the start-up warning naming the missing database");

  const requests: [string, RequestInit][] = [
    ["/health", { headers: agent }],
    ["/events", { method: "POST", headers: agent, body: JSON.stringify(validEvent()) }],
    ["/sessions/heartbeat", { method: "POST", headers: agent, body: "{}" }],
    ["/commands?session_id=s&runtime_id=r", { headers: agent }],
    ["/operator/sessions", { headers: { authorization: "Bearer operator-token-for-missing-services" } }],
    ["/no-such-route", { headers: agent }],
  ];
  for (const [path, init] of requests) {
    const response = await fetch(server.baseUrl + path, init);
    assert.equal(response.status, 503, path);
    assert.match(response.headers.get("content-type") ?? "", /application\/json/, path);
    const body = await response.json();
    assert.deepEqual(body, { error: "service_missing", missing: ["database"] }, path);
    assert.ok(ErrorAnswer.safeParse(body).success, `${path}: the answer is a protocol error`);
  }
  const anonymous = await fetch(`${server.baseUrl}/health`);
  assert.equal(anonymous.status, 401, "the bearer check comes before saying what is missing");
  assert.deepEqual(await anonymous.json(), { error: "unauthorized" });
  assert.equal(log.warnings().filter(missingDatabase).length, 1, "one warning for start-up and every refused request");

  const driver = await useDatabase(server.app.plugin.bind(server.app) as Use, "sqlite", server.dataDir);
  await waitUntil(async () => (await fetch(`${server.baseUrl}/health`, { headers: agent })).status === 200, "/health answering 200 once the driver loaded");
  const event = validEvent();
  const accepted = await fetch(`${server.baseUrl}/events`, { method: "POST", headers: agent, body: JSON.stringify(event) });
  assert.equal(accepted.status, 202);

  driver.dispose();
  await waitUntil(async () => (await fetch(`${server.baseUrl}/health`, { headers: agent })).status === 503, "503 again once the driver is gone");
  const again = await fetch(`${server.baseUrl}/events/${encodeURIComponent(String(event.event_id))}`, { headers: agent });
  assert.deepEqual(await again.json(), { error: "service_missing", missing: ["database"] });
  await fetch(`${server.baseUrl}/health`, { headers: agent });
  assert.equal(log.warnings().filter(missingDatabase).length, 2, "the second outage is reported once more");
});

test("a driver that loads after the plugin in the same start-up is no outage: no warning", async (t) => {
  const log = captureLog();
  t.after(log.stop);
  const token = "token-for-a-late-driver-0123456789abcdef";
  const server = await startKoishi({
    database: "none",
    withoutPlugin: true,
    plugins: (use, app) => {
      // The log persona keeps the notice-route warning out of this test's "no warning".
      use(notifyWebhook, { token, logPersona: true });
      void useDatabase(use, "sqlite", app.baseDir);
    },
  });
  t.after(() => server.stop());
  await waitUntil(
    async () => (await fetch(`${server.baseUrl}/health`, { headers: { authorization: `Bearer ${token}` } })).status === 200,
    "/health answering 200",
  );
  assert.deepEqual(log.warnings(), []);
});

for (const [locale, failedWords, installWords] of [
  ["zh-CN", /^缺少 Koishi 服务：database，所有接口返回 503。 插件 \S+ 加载了但启动失败：The database directory '.*' is not accessible/, /请安装/],
  [
    "en-US",
    /^Koishi services missing: database; every route answers 503\. The plugin \S+ is loaded but failed to start: The database directory '.*' is not accessible/,
    /Install and enable/,
  ],
] as const) {
  test(`a driver that fails to start (the documented path in a fresh folder) is named with its own error, not blamed on a missing driver (${locale})`, async (t) => {
    const log = captureLog();
    t.after(log.stop);
    const server = await startKoishi({
      database: "none",
      locales: [locale],
      plugins: (use, app) => void useDatabase(use, "sqlite", join(app.baseDir, "no-such-folder")),
    });
    t.after(() => server.stop());
    const warning = await waitUntil(() => log.warnings().find((line) => line.includes("database")), "the missing-database warning");
    assert.match(warning, failedWords);
    assert.doesNotMatch(warning, installWords);
  });
}
