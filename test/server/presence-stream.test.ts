/**
 * The presence stream (`GET /sessions/stream`) against the real plugin in Koishi: the handshake is
 * held to the HTTP routes' token check, each frame is answered like `POST /sessions/heartbeat`
 * (same service, same limits, same codes), and the bounds a kept socket needs hold.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { HeartbeatAnswer, STREAM_CLOSE, StreamRefusal } from "../../protocol/sessions.ts";
import fc from "fast-check";
import { ErrorCode, LIMITS } from "../../protocol/wire.ts";
import { hostileString, seedFrom } from "../reliability/support.ts";
import { agentApi, call, heartbeatOf, onlineServer, operatorApi, startServer, type Answer } from "../../harness/agent-api.ts";
import { openStream } from "../../harness/presence-stream.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";

async function onlineIds(server: KoishiHarness): Promise<string[]> {
  return ((await operatorApi(server).sessions()).body.sessions as { session_id: string }[]).map((s) => s.session_id);
}

describe("the presence stream's handshake is checked like every HTTP route", () => {
  test("no token, a wrong token, the token in the query or as a subprotocol: closed 4401 at once, nothing registered", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const attempts = {
      "no token": openStream(server, { authorization: null }),
      "a wrong token": openStream(server, { authorization: "Bearer wrong-token-of-the-same-kind-0123456789" }),
      "the token in the query": openStream(server, { authorization: null, query: `?token=${server.token}&access_token=${server.token}` }),
      "the token as a subprotocol": openStream(server, { authorization: null, protocols: [server.token] }),
    };
    for (const [what, stream] of Object.entries(attempts)) {
      // Sent as soon as it opens, before the refusal arrives: it must not count.
      void stream.opened.then(() => stream.socket.send(JSON.stringify(heartbeatOf({ session_id: "s-intruder" })))).catch(() => {});
      assert.deepEqual(await stream.closed, { code: 4401, reason: "unauthorized" }, what);
    }
    assert.deepEqual(await onlineIds(server), []);
  });

  test("with the token, each frame is one heartbeat answered like the HTTP route, and /health offers the stream", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const health = await call(server, "GET", "/health");
    assert.ok(health.body.capabilities.includes("presence_stream"), health.body.capabilities.join(","));
    const overHttp = await agentApi(server).heartbeat({ session_id: "s-http", runtime_id: "r-http" });
    assert.equal(overHttp.body.presence_stream, true, "the HTTP answer says the stream is there");
    const stream = openStream(server);
    t.after(() => stream.socket.close());
    const answer = HeartbeatAnswer.parse(await stream.send(heartbeatOf({ state: "running" })));
    assert.deepEqual(Object.keys(answer).sort(), Object.keys(overHttp.body).sort());
    assert.equal(answer.presence_stream, true);
    assert.deepEqual((await onlineIds(server)).sort(), ["s-1", "s-http"]);
    assert.equal((await operatorApi(server).sessions()).body.sessions.find((s: { session_id: string }) => s.session_id === "s-1").state, "running");
    await stream.send(heartbeatOf({ state: "idle" }));
    assert.equal((await operatorApi(server).sessions()).body.sessions.find((s: { session_id: string }) => s.session_id === "s-1").state, "idle");
  });

  test("closing the stream is not going offline: the session stays until its TTL or an offline", async (t) => {
    const { server, agent } = await onlineServer(t);
    const stream = openStream(server, {});
    await stream.send(heartbeatOf({ session_id: "s-2", runtime_id: "r-2" }));
    stream.socket.close();
    await stream.closed;
    assert.deepEqual((await onlineIds(server)).sort(), ["s-1", "s-2"]);
    assert.deepEqual((await agent.offline("s-2", "r-2")).body, { removed: true });
  });

  test("presenceStream off: no capability, answers say nothing, and no stream carries a heartbeat", async (t) => {
    const server = await startServer({ config: { presenceStream: false } });
    t.after(() => server.stop());
    assert.ok(!(await call(server, "GET", "/health")).body.capabilities.includes("presence_stream"));
    assert.equal((await agentApi(server).heartbeat()).body.presence_stream, undefined);
    const stream = openStream(server);
    void stream.opened.then(() => stream.socket.send(JSON.stringify(heartbeatOf({ session_id: "s-2" })))).catch(() => {});
    await stream.closed;
    assert.deepEqual(await onlineIds(server), ["s-1"]);
  });
});

describe("frames", () => {
  test("a malformed frame gets an error frame and the stream goes on", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const stream = openStream(server);
    t.after(() => stream.socket.close());
    assert.deepEqual(await stream.send("{not json"), { error: "invalid_json", status: 400 });
    const refused = StreamRefusal.parse(await stream.send({ ...heartbeatOf(), project: "/home/u/secret" }));
    assert.equal(refused.error, "invalid_request");
    assert.deepEqual(
      refused.issues?.map((issue) => issue.path),
      ["project"],
    );
    assert.equal(HeartbeatAnswer.parse(await stream.send(heartbeatOf())).ttl_ms, 30_000);
    assert.deepEqual(await onlineIds(server), ["s-1"]);
  });

  test(`a frame over ${LIMITS.heartbeatBodyBytes / 1024} KiB closes the stream 1009, a binary frame 1003; neither registers anything`, async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const big = openStream(server);
    await big.opened;
    big.socket.send(JSON.stringify({ ...heartbeatOf(), model: "x".repeat(LIMITS.heartbeatBodyBytes) }));
    assert.equal((await big.closed).code, STREAM_CLOSE.tooBig);
    const binary = openStream(server);
    await binary.opened;
    binary.socket.send(new TextEncoder().encode(JSON.stringify(heartbeatOf())));
    assert.equal((await binary.closed).code, STREAM_CLOSE.binary);
    assert.deepEqual(await onlineIds(server), []);
  });

  test("a stream belongs to the runtime of its first heartbeat; a newer stream of that runtime replaces it", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const first = openStream(server);
    await first.send(heartbeatOf());
    const other = StreamRefusal.parse(await first.send(heartbeatOf({ session_id: "s-2", runtime_id: "r-2" })));
    assert.deepEqual([other.error, other.issues?.[0]?.path], ["invalid_request", "runtime_id"]);
    const second = openStream(server);
    t.after(() => second.socket.close());
    await second.send(heartbeatOf());
    assert.deepEqual(await first.closed, { code: STREAM_CLOSE.replaced, reason: "replaced" });
    assert.equal(HeartbeatAnswer.parse(await second.send(heartbeatOf())).presence_stream, true);
  });
});

describe("quiet frames", () => {
  test("an accepted quiet frame is answered by nothing, yet counts: the next answer is the next frame's", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const stream = openStream(server);
    t.after(() => stream.socket.close());
    await stream.post({ ...heartbeatOf({ state: "running" }), quiet: true });
    await stream.post({ ...heartbeatOf({ session_id: "s-2" }), quiet: false });
    const answer = HeartbeatAnswer.parse(await stream.send(heartbeatOf({ session_id: "s-3" })));
    assert.equal(answer.quiet_beats, true, "the server says it takes quiet frames");
    // Three frames, in order: the quiet one said nothing, `quiet: false` is answered like no key.
    assert.equal(stream.answers.length, 2, JSON.stringify(stream.answers));
    assert.deepEqual((await onlineIds(server)).sort(), ["s-1", "s-2", "s-3"]);
    const sessions = (await operatorApi(server).sessions()).body.sessions as { session_id: string; state: string }[];
    assert.equal(sessions.find((s) => s.session_id === "s-1")?.state, "running");
  });

  test("a quiet key that is not a boolean is refused like any unknown key, and answered", async (t) => {
    const server = await startServer();
    t.after(() => server.stop());
    const stream = openStream(server);
    t.after(() => stream.socket.close());
    const refused = StreamRefusal.parse(await stream.send({ ...heartbeatOf(), quiet: "yes" }));
    assert.deepEqual([refused.error, refused.quiet], ["invalid_request", undefined]);
    assert.deepEqual(await onlineIds(server), []);
  });
});

describe("hostile frames", () => {
  test("any text frame gets exactly one answer, an acceptance or a refusal in the protocol's codes; the stream stays open and refused frames register nothing", async (t) => {
    const server = await startServer({ config: { heartbeatsPerMinute: 1_000_000, heartbeatBurst: 1_000_000 } });
    t.after(() => server.stop());
    const stream = openStream(server);
    t.after(() => stream.socket.close());
    const accepted = new Set<string>();
    const heartbeatKeys = Object.keys(heartbeatOf()) as (keyof ReturnType<typeof heartbeatOf>)[];
    // Mostly heartbeats of this stream's runtime with one field made hostile, so acceptances happen too.
    const frame = fc.oneof(
      fc.string({ maxLength: 200 }),
      fc.json({ maxDepth: 40 }),
      fc
        .record({ key: fc.constantFrom(...heartbeatKeys), value: fc.oneof(hostileString(300), fc.jsonValue({ maxDepth: 3 })), id: fc.nat(50) })
        .map(({ key, value, id }) => JSON.stringify({ ...heartbeatOf({ session_id: `f-${id}` }), [key]: key === "runtime_id" ? "r-1" : value })),
    );
    const seed = seedFrom("STREAM_FUZZ_SEED");
    t.diagnostic(`STREAM_FUZZ_SEED=${seed}`);
    await fc.assert(
      fc.asyncProperty(frame, async (text) => {
        const answer = await stream.send(text);
        if ("error" in answer) {
          const refusal = StreamRefusal.parse(answer);
          assert.ok((ErrorCode.options as readonly string[]).includes(refusal.error), refusal.error);
          assert.ok(refusal.status >= 400 && refusal.status < 500, JSON.stringify(refusal));
        } else {
          HeartbeatAnswer.parse(answer);
          accepted.add((JSON.parse(text) as { session_id: string }).session_id);
        }
      }),
      { numRuns: 300, seed },
    );
    assert.equal(stream.socket.readyState, stream.socket.OPEN);
    for (const id of await onlineIds(server)) assert.ok(accepted.has(id), `${id} is online only if a frame naming it was accepted`);
  });
});

describe("bounds", () => {
  test("beyond presenceStreamsTotal a stream is closed 1013 and that client can still beat over HTTP", async (t) => {
    const server = await startServer({ config: { presenceStreamsTotal: 1 } });
    t.after(() => server.stop());
    const held = openStream(server);
    t.after(() => held.socket.close());
    await held.send(heartbeatOf());
    const refused = openStream(server);
    assert.equal((await refused.closed).code, STREAM_CLOSE.full);
    assert.equal((await agentApi(server).heartbeat({ session_id: "s-2", runtime_id: "r-2" })).status, 200);
    // A closed stream frees its place.
    held.socket.close();
    await held.closed;
    const next = openStream(server);
    t.after(() => next.socket.close());
    assert.equal(HeartbeatAnswer.parse(await next.send(heartbeatOf({ session_id: "s-3", runtime_id: "r-3" }))).ttl_ms, 30_000);
  });

  test("a stream that sends no complete frame for one TTL is closed 4408", async (t) => {
    const server = await startServer({ config: { sessionHeartbeatTimeoutMs: 1000 } });
    t.after(() => server.stop());
    const quiet = openStream(server);
    await quiet.opened;
    assert.deepEqual(await quiet.closed, { code: STREAM_CLOSE.idle, reason: "idle" });
  });
});

/** An HTTP refusal in the stream's words: code, status, issues, Retry-After as ms. */
function asFrame(answer: Answer, retryAfter: string | null): unknown {
  return { ...answer.body, status: answer.status, ...(retryAfter === null ? {} : { retry_after_ms: Number(retryAfter) * 1000 }) };
}

describe("a refusal reads the same over HTTP and over the stream", () => {
  // Each row: heartbeats that set the scene, then the one refused; run once per surface with its own ids.
  const rows: { name: string; config?: Record<string, number>; scene: (id: string) => object[]; refused: (id: string) => object }[] = [
    {
      name: "session_in_use: another runtime holds the session",
      scene: (id) => [heartbeatOf({ session_id: `s-${id}`, runtime_id: `r-${id}-a` })],
      refused: (id) => heartbeatOf({ session_id: `s-${id}`, runtime_id: `r-${id}-b` }),
    },
    {
      name: "rate_limited: the session's burst is used up",
      scene: (id) => Array.from({ length: 3 }, () => heartbeatOf({ session_id: `s-${id}`, runtime_id: `r-${id}` })),
      refused: (id) => heartbeatOf({ session_id: `s-${id}`, runtime_id: `r-${id}` }),
    },
    {
      name: "invalid_request: a path for a project, an unknown key",
      scene: () => [],
      refused: (id) => ({ ...heartbeatOf({ session_id: `s-${id}`, runtime_id: `r-${id}` }), project: "a/b", extra: 1 }),
    },
  ];
  for (const row of rows) {
    test(row.name, async (t) => {
      const server = await startServer({ config: { heartbeatsPerMinute: 60, heartbeatBurst: 3 } });
      t.after(() => server.stop());
      for (const body of row.scene("http")) assert.equal((await call(server, "POST", "/sessions/heartbeat", body)).status, 200);
      const response = await fetch(`${server.baseUrl}/sessions/heartbeat`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
        body: JSON.stringify(row.refused("http")),
      });
      const overHttp = asFrame({ status: response.status, body: await response.json() }, response.headers.get("retry-after"));
      const stream = openStream(server);
      t.after(() => stream.socket.close());
      // The scene goes over HTTP, the refused heartbeat over the stream: both surfaces take from the same buckets and registry.
      for (const body of row.scene("ws")) HeartbeatAnswer.parse((await call(server, "POST", "/sessions/heartbeat", body)).body);
      const overStream = StreamRefusal.parse(await stream.send(row.refused("ws")));
      // The same heartbeat sent quiet: refused all the same, in order (before the answer to the frame after it), marked quiet.
      for (const body of row.scene("wq")) HeartbeatAnswer.parse((await call(server, "POST", "/sessions/heartbeat", body)).body);
      const quietStream = openStream(server);
      t.after(() => quietStream.socket.close());
      await quietStream.post({ ...row.refused("wq"), quiet: true });
      assert.deepEqual(await quietStream.send("{not json"), { error: "invalid_json", status: 400 });
      const { quiet, ...overQuiet } = StreamRefusal.parse(quietStream.answers[0]);
      assert.equal(quiet, true);
      assert.equal(quietStream.answers.length, 2);
      // Retry-After is whole seconds over HTTP; the stream says ms, so compare in seconds rounded up.
      const seconds = (frame: { retry_after_ms?: number }) => (frame.retry_after_ms === undefined ? undefined : Math.ceil(frame.retry_after_ms / 1000));
      const httpFrame = overHttp as { retry_after_ms?: number };
      assert.deepEqual({ ...overStream, retry_after_ms: seconds(overStream) }, { ...httpFrame, retry_after_ms: seconds(httpFrame) });
      assert.deepEqual({ ...overQuiet, retry_after_ms: seconds(overQuiet) }, { ...httpFrame, retry_after_ms: seconds(httpFrame) });
    });
  }
});
