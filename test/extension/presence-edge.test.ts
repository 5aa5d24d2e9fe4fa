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

/** A stand-in for the undici WebSocket the client opens: records frames, and lets the test open, answer or drop it. */
function fakeSocket(frames: string[]) {
  const listeners = new Map<string, ((event: { data?: string; code?: number; reason?: string }) => void)[]>();
  const emit = (type: string, event: { data?: string; code?: number; reason?: string } = {}) => {
    for (const listener of listeners.get(type) ?? []) listener(event);
  };
  return {
    socket: {
      addEventListener: (type: string, listener: (event: { data?: string }) => void) => listeners.set(type, [...(listeners.get(type) ?? []), listener]),
      send: (data: string) => frames.push((JSON.parse(data) as { quiet?: boolean }).quiet === true ? "quiet" : "answered"),
      close: () => emit("close", { code: 1000, reason: "" }),
    },
    open: () => emit("open"),
    answer: (answer: object) => emit("message", { data: JSON.stringify(answer) }),
    drop: () => emit("close", { code: 1006, reason: "" }),
  };
}

test("the timer follows the interval in effect: configured until the stream answers with quiet beats, half the TTL then, configured again at once when it drops, none after stop", async (t) => {
  t.mock.timers.enable({ apis: ["setInterval"] });
  let clock = 0;
  const answer = { ttl_ms: 10_000, server_time: new Date(0).toISOString(), command_protocol: 3, presence_stream: true, quiet_beats: true };
  const http: string[] = [];
  const frames: string[] = [];
  const sockets: ReturnType<typeof fakeSocket>[] = [];
  const client = {
    async request(_method: string, path: string) {
      await new Promise((resolve) => setImmediate(resolve));
      http.push(path);
      return path === "sessions/offline" ? { removed: true } : answer;
    },
    socket: () => {
      sockets.push(fakeSocket(frames));
      return sockets.at(-1)!.socket;
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
    now: () => clock,
  });
  /** Advances the clock and the mocked timers by `ms`, letting each heartbeat it causes settle: what went which way. */
  const advance = async (ms: number) => {
    const before = { http: http.length, frames: frames.length };
    for (let passed = 0; passed < ms; passed += 500) {
      clock += 500;
      t.mock.timers.tick(500);
      await settled();
    }
    return { http: http.length - before.http, frames: frames.slice(before.frames) };
  };

  presence.start(ctx);
  await settled();
  assert.deepEqual([http, sockets.length], [["sessions/heartbeat"], 1], "the first heartbeat goes by HTTP, and its answer opens the stream");
  sockets[0]!.open();
  assert.deepEqual(await advance(1_000), { http: 0, frames: ["answered"] }, "the stream's first frame: at the configured interval");
  sockets[0]!.answer(answer);
  await settled();
  assert.deepEqual(await advance(4_500), { http: 0, frames: [] }, "half the TTL is 5 s: nothing before it");
  assert.deepEqual(await advance(500), { http: 0, frames: ["quiet"] }, "half a TTL after the answer: one quiet frame");
  assert.deepEqual(await advance(5_000), { http: 0, frames: ["answered"] }, "one TTL after the answer: answered");
  sockets[0]!.drop();
  await settled();
  assert.deepEqual(http.slice(1), ["sessions/heartbeat"], "the heartbeat the stream lost goes by HTTP at once");
  assert.deepEqual(await advance(1_000), { http: 1, frames: [] }, "then the configured interval, at once");
  await presence.stop();
  const after = http.length;
  await advance(30_000);
  assert.equal(http.length, after, "no timer left after stop");
  assert.equal(http.at(-1), "sessions/offline");
});
