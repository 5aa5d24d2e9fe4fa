/** The Presence edge with a scripted client: what each heartbeat answer writes into the ServerFacts record. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import type { ApiClient } from "../../extension/server-client/http-client.ts";
import { ServerError } from "../../extension/server-client/retry.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { Presence } from "../../extension/presence/presence.ts";
import { ServerFacts } from "../../extension/server-client/server-facts.ts";

type Answer = { command_protocol?: number } | "fail";

/** A Presence whose client answers each heartbeat from `answers`, in order, on the next turn. */
function scripted(answers: Answer[]) {
  const calls: { path: string; answered: Promise<unknown> }[] = [];
  const client = {
    request(_method: string, path: string) {
      const answered = (async () => {
        await new Promise((resolve) => setImmediate(resolve));
        if (path === "sessions/offline") return { removed: true };
        const answer = answers.shift() ?? {};
        if (answer === "fail") throw new ServerError("connection refused", { retryable: true });
        return { ttl_ms: 30_000, server_time: new Date(0).toISOString(), ...answer };
      })();
      calls.push({ path, answered });
      return answered;
    },
  } as unknown as ApiClient;
  /** Every request so far answered, and presence's own handling of the answers (chained on them) done. */
  const answered = async () => {
    await Promise.allSettled(calls.map((call) => call.answered));
    await new Promise((resolve) => setImmediate(resolve));
  };
  const pi = { on: () => () => {} } as unknown as ExtensionAPI;
  const ctx = {
    cwd: "/tmp/app",
    model: undefined,
    isIdle: () => true,
    sessionManager: { getSessionId: () => "s-1" },
  } as unknown as ExtensionContext;
  const server = new ServerFacts();
  const reports: string[] = [];
  const config = { presence: { ...DEFAULT_CONFIG.presence, heartbeatIntervalMs: 60_000 }, command: DEFAULT_CONFIG.command };
  const presence = new Presence(pi, {
    runtimeId: "r-1",
    server,
    connection: () => ({ client, config }),
    report: (message) => reports.push(message),
    text: () => messagesFor("en-US"),
  });
  return { presence, server, calls, reports, ctx, answered };
}

test("each heartbeat answer is written into the server record: accepted, heard idle, the protocol it speaks", async () => {
  const rows: { answers: Answer[]; accepted: boolean; heardIdle: boolean; protocol: number; status: { accepted: boolean; failed: boolean } }[] = [
    { answers: [{ command_protocol: 3 }], accepted: true, heardIdle: true, protocol: 3, status: { accepted: true, failed: false } },
    { answers: [{}], accepted: true, heardIdle: true, protocol: 2, status: { accepted: true, failed: false } },
    { answers: ["fail"], accepted: false, heardIdle: false, protocol: 2, status: { accepted: false, failed: true } },
    { answers: [{ command_protocol: 3 }, "fail"], accepted: false, heardIdle: false, protocol: 3, status: { accepted: false, failed: true } },
    { answers: ["fail", { command_protocol: 3 }], accepted: true, heardIdle: true, protocol: 3, status: { accepted: true, failed: false } },
  ];
  for (const row of rows) {
    const { presence, server, ctx, answered } = scripted([...row.answers]);
    presence.start(ctx);
    for (let i = 1; i < row.answers.length; i++) {
      await answered();
      presence.beat();
    }
    await answered();
    const status = presence.status();
    assert.deepEqual(
      {
        accepted: server.accepted(),
        heardIdle: server.heardIdle(),
        protocol: server.commandProtocol(),
        status: { accepted: status.accepted, failed: status.lastFailure !== null },
      },
      { accepted: row.accepted, heardIdle: row.heardIdle, protocol: row.protocol, status: row.status },
      JSON.stringify(row.answers),
    );
    await presence.stop();
  }
});

test("stopping tells whoever waits for an acceptance no, says offline once, and the record no longer says idle", async () => {
  const { presence, server, calls, ctx, reports, answered } = scripted(["fail"]);
  presence.start(ctx);
  const waiting = server.whenAccepted();
  await answered();
  assert.deepEqual(reports, ["Presence heartbeat failed: connection refused"]);
  await presence.stop();
  assert.equal(await waiting, false);
  assert.equal(server.heardIdle(), false);
  assert.deepEqual(
    calls.map((call) => call.path),
    ["sessions/heartbeat", "sessions/offline"],
  );
});

test("the timer beats at the configured interval, and none is left after stop", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval"] });
  const http: string[] = [];
  const client = {
    async request(_method: string, path: string) {
      await new Promise((resolve) => setImmediate(resolve));
      http.push(path);
      return path === "sessions/offline" ? { removed: true } : { ttl_ms: 10_000, server_time: new Date(0).toISOString(), command_protocol: 3 };
    },
  } as unknown as ApiClient;
  const settled = () => new Promise((resolve) => setImmediate(resolve)).then(() => new Promise((resolve) => setImmediate(resolve)));
  const ctx = { cwd: "/tmp/app", model: undefined, isIdle: () => true, sessionManager: { getSessionId: () => "s-1" } } as unknown as ExtensionContext;
  const presence = new Presence({ on: () => () => {} } as unknown as ExtensionAPI, {
    runtimeId: "r-1",
    server: new ServerFacts(),
    connection: () => ({ client, config: { presence: { ...DEFAULT_CONFIG.presence, heartbeatIntervalMs: 1_000 }, command: DEFAULT_CONFIG.command } }),
    report: () => {},
    text: () => messagesFor("en-US"),
  });
  /** Advances the mocked timers by `ms`, letting each heartbeat it causes settle: how many went. */
  const advance = async (ms: number) => {
    const before = http.length;
    for (let passed = 0; passed < ms; passed += 500) {
      t.mock.timers.tick(500);
      await settled();
    }
    return http.length - before;
  };

  presence.start(ctx);
  await settled();
  assert.deepEqual(http, ["sessions/heartbeat"], "one heartbeat at once");
  assert.equal(await advance(500), 0, "nothing before the interval");
  assert.equal(await advance(500), 1, "one at the interval");
  assert.equal(await advance(3_000), 3, "one per interval");
  await presence.stop();
  const after = http.length;
  await advance(30_000);
  assert.equal(http.length, after, "no timer left after stop");
  assert.equal(http.at(-1), "sessions/offline");
});
