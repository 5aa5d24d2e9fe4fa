/**
 * Presence over the stream, end to end: the extension as Pi loads it, in a REAL Pi session,
 * against the REAL notify-webhook plugin in Koishi. What arrives is counted at the server's own
 * sockets (HTTP heartbeat requests, stream connections and their frames), so the test sees which
 * way each heartbeat came, not what the client meant to do.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type {} from "@koishijs/plugin-server";
import { dataDirFor } from "../../extension/config/config.ts";
import type { Config } from "../../server/notify-webhook.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { OPERATOR_TOKEN, operatorApi } from "../../harness/agent-api.ts";
import { waitUntil } from "../../harness/wait.ts";

const HEARTBEAT_MS = 1_000;
/** Several heartbeat intervals and a stream retry on a loaded 2-core machine. */
const BOUND_MS = 30_000;

async function setup(t: TestContext, config: Partial<Config> = {}) {
  const koishi = await startKoishi({ config: { operatorToken: OPERATOR_TOKEN, ...config } });
  const seen = { http: 0, streams: 0, states: [] as string[], sockets: new Set<{ terminate(): void }>() };
  const { _http: http, _ws: ws } = koishi.app.server;
  http.on("request", (request) => {
    if (request.method === "POST" && request.url?.endsWith("/sessions/heartbeat")) seen.http++;
  });
  ws.on("connection", (socket, request) => {
    if (!request.url?.endsWith("/sessions/stream")) return;
    seen.streams++;
    seen.sockets.add(socket);
    socket.on("close", () => seen.sockets.delete(socket));
    socket.on("message", (data) => seen.states.push((JSON.parse(String(data)) as { state: string }).state));
  });
  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: koishi.token,
    ANON_NOTIFY_RECIPIENT_QQ: "10001",
    ANON_NOTIFY_ANON_QQ: "10002",
  });
  const userConfig = dataDirFor(join(root, "agent"));
  mkdirSync(userConfig, { recursive: true });
  writeFileSync(join(userConfig, "config.json"), JSON.stringify({ language: "en-US", presence: { heartbeatIntervalMs: HEARTBEAT_MS } }));
  const pi = await startPi({ root, mode: "rpc" });
  t.after(async () => {
    await pi.dispose({ keepRoot: true }).catch(() => undefined);
    process.env = saved;
    await koishi.stop();
    rmSync(root, { recursive: true, force: true });
  });
  await pi.prompt("/anon-notify");
  const operator = operatorApi(koishi);
  const sessionId = pi.session.sessionManager.getSessionId();
  const online = async () => ((await operator.sessions()).body.sessions as { session_id: string }[]).some((s) => s.session_id === sessionId);
  await waitUntil(online, "the session online", BOUND_MS);
  /** The presence line of `/anon-notify-doctor`, as the person reads it. */
  const doctorSays = async () => {
    await pi.prompt("/anon-notify-doctor");
    return pi
      .notices()
      .at(-1)
      ?.split("\n")
      .find((line) => line.trim().startsWith("presence:"))
      ?.trim();
  };
  return { pi, seen, online, doctorSays };
}

test("with the capability, heartbeats go over one stream; a run's running and idle arrive as frames, and HTTP falls silent", async (t) => {
  const { pi, seen, online, doctorSays } = await setup(t);
  await waitUntil(
    () => seen.states.length >= 2,
    () => `two heartbeats over the stream (streams ${seen.streams}, HTTP ${seen.http})`,
    BOUND_MS,
  );
  assert.equal(await doctorSays(), "presence: running, accepted by the server (over the presence stream)");
  const httpBefore = seen.http;
  seen.states.length = 0;
  pi.script([ai.fauxAssistantMessage("done")]);
  await pi.prompt("do it");
  await waitUntil(
    () => seen.states.includes("running") && seen.states.at(-1) === "idle",
    () => `running then idle over the stream: ${seen.states.join(",")}`,
    BOUND_MS,
  );
  await waitUntil(() => seen.states.length >= 4, "two more timer heartbeats over the stream", BOUND_MS);
  assert.equal(seen.http, httpBefore, "no heartbeat went by HTTP while the stream was open");
  assert.equal(seen.streams, 1, "one stream for the runtime");
  assert.ok(await online());
});

test("a stream the server kills: heartbeats go on over HTTP at once, the session stays online, and the stream comes back", async (t) => {
  const { seen, online } = await setup(t);
  await waitUntil(() => seen.states.length >= 1, "a heartbeat over the stream", BOUND_MS);
  const httpBefore = seen.http;
  for (const socket of seen.sockets) socket.terminate();
  await waitUntil(() => seen.http > httpBefore, "a heartbeat over HTTP after the stream died", BOUND_MS);
  assert.ok(await online(), "still online");
  await waitUntil(
    () => seen.streams === 2 && seen.sockets.size === 1,
    () => `the stream reopened (streams ${seen.streams})`,
    BOUND_MS,
  );
  const framesBefore = seen.states.length;
  await waitUntil(() => seen.states.length > framesBefore, "heartbeats over the new stream", BOUND_MS);
  assert.ok(await online(), "still online");
});

test("a server without the capability: heartbeats go by HTTP only, and no stream is opened", async (t) => {
  const { seen, online, doctorSays } = await setup(t, { presenceStream: false });
  const httpBefore = seen.http;
  await waitUntil(() => seen.http >= httpBefore + 3, "three more heartbeats over HTTP", BOUND_MS);
  assert.equal(seen.streams, 0);
  assert.equal(await doctorSays(), "presence: running, accepted by the server (over HTTP)");
  assert.ok(await online());
});
