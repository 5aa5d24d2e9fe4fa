/** The command queue (server/queue/) over its real HTTP routes: presence, claims, leases, ACKs, cancels, long polls, images. */
import { once } from "node:events";
import type { IncomingMessage, ServerResponse } from "node:http";
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { fetch } from "undici";
import { AuditPage, type AuditEntry } from "../../protocol/audit.ts";
import { ClaimAnswer, type CommandSummary } from "../../protocol/queue.ts";
import { OperatorCommandCreated } from "../../protocol/operator.ts";
import { SessionProjection } from "../../protocol/sessions.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { LongPollWaker } from "../../server/queue/waker.ts";
import type { Context } from "koishi";
import { AuditLog } from "../../server/audit/store.ts";
import { CommandRoutes } from "../../server/queue/routes.ts";
import { CommandStore } from "../../server/queue/store.ts";
import { COMMAND_TABLE } from "../../server/queue/table.ts";
import { HttpApi } from "../../server/http/api.ts";
import { OperatorRoutes } from "../../server/operator/routes.ts";
import { MuteStore } from "../../server/mute/store.ts";
import { OperatorService } from "../../server/operator/service.ts";
import { SessionRegistry } from "../../server/sessions/registry.ts";
import { HostRegistry } from "../../server/hosts/registry.ts";
import { SessionRoutes } from "../../server/sessions/routes.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { OPERATOR_TOKEN, agentApi, call, onlineServer, operatorApi, startServer, type ApiTarget } from "../../harness/agent-api.ts";
import { imageOf } from "./images.ts";
import { waitUntil } from "../../harness/wait.ts";

test("heartbeats make a session visible as its safe projection until it goes offline", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const agent = agentApi(server);
  const operator = operatorApi(server);

  const beat = await agent.heartbeat({ state: "running", activity: "bash" });
  assert.equal(beat.status, 200);
  assert.equal(beat.body.ttl_ms, 30_000);
  await agent.heartbeat({ session_id: "s-2", runtime_id: "r-2", supports_images: false });

  const listed = await operator.sessions();
  assert.equal(listed.status, 200);
  assert.deepEqual(listed.body.sessions.map((s: SessionProjection) => s.session_id).sort(), ["s-1", "s-2"]);
  for (const session of listed.body.sessions) assert.ok(SessionProjection.strict().safeParse(session).success, JSON.stringify(session));
  assert.ok(!JSON.stringify(listed.body).includes("r-1"), "runtime ids never leave the registry");
  const s1 = listed.body.sessions.find((s: SessionProjection) => s.session_id === "s-1");
  assert.equal(s1.state, "running");

  const health = await call(server, "GET", "/health");
  for (const capability of ["presence", "commands", "command_images", "long_poll"]) assert.ok(health.body.capabilities.includes(capability), capability);
  assert.equal(health.body.protocol.commands, 3);

  assert.deepEqual((await agent.offline("s-1", "r-1")).body, { removed: true });
  assert.deepEqual(
    (await operator.sessions()).body.sessions.map((s: SessionProjection) => s.session_id),
    ["s-2"],
  );
});

test("an old runtime cannot take a newer one offline, nor claim for it", async (t) => {
  const server = await startServer({ config: { sessionHeartbeatTimeoutMs: 1000 } });
  t.after(() => server.stop());
  const agent = agentApi(server);
  await agent.heartbeat({ runtime_id: "r-old" });
  // The new runtime registers once the old one's heartbeats have expired.
  await waitUntil(async () => ((await agent.heartbeat({ runtime_id: "r-new" })).status === 200 ? true : undefined), "r-new registered after r-old expired");

  assert.deepEqual((await agent.offline("s-1", "r-old")).body, { removed: false });
  assert.equal((await operatorApi(server).sessions()).body.sessions.length, 1);
  assert.deepEqual(await agent.claim("s-1", "r-old"), { status: 409, body: { error: "session_offline" } });
  assert.deepEqual(await agent.claim("s-1", "r-new"), { status: 200, body: { command: null } });
  assert.deepEqual(await agent.claim("s-unknown", "r-new"), { status: 409, body: { error: "session_offline" } });
});

test("bad heartbeats are refused with the protocol's errors", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const agent = agentApi(server);
  const cases: [string, Record<string, unknown>][] = [
    ["a full path as project", { project: "/home/me/demo" }],
    ["an unknown state", { state: "sleeping" }],
    ["an extra key", { token: "x" }],
  ];
  for (const [name, overrides] of cases) {
    const answer = await agent.heartbeat(overrides as never);
    assert.equal(answer.status, 400, name);
    assert.equal(answer.body.error, "invalid_request", name);
  }
  assert.deepEqual((await operatorApi(server).sessions()).body.sessions, []);
});

test("commands are claimed one at a time, in order, and acknowledged idempotently", async (t) => {
  const { agent, operator } = await onlineServer(t);

  const ids: string[] = [];
  for (const instruction of ["first", "second", "third"]) {
    const created = await operator.create({ session_id: "s-1", instruction });
    assert.equal(created.status, 201);
    assert.ok(OperatorCommandCreated.safeParse(created.body).success);
    assert.equal(created.body.command.state, "pending");
    assert.equal(created.body.command.cancellable, true);
    assert.equal(created.body.command.origin, "operator");
    ids.push(created.body.command.command_id);
  }

  const delivered: string[] = [];
  for (let round = 0; ; round++) {
    assert.ok(round <= ids.length, "the queue never ran empty");
    const claimed = await agent.claim();
    assert.equal(claimed.status, 200);
    assert.ok(ClaimAnswer.safeParse(claimed.body).success);
    if (!claimed.body.command) break;
    // The unacknowledged lease holds the queue, so nothing overtakes it.
    assert.deepEqual((await agent.claim()).body, { command: null });
    delivered.push(claimed.body.command.instruction);
    const { command_id } = claimed.body.command;
    assert.deepEqual(await agent.ack(command_id, claimed.body.lease.token), { status: 200, body: { state: "accepted" } });
    assert.deepEqual(await agent.ack(command_id, claimed.body.lease.token), { status: 200, body: { state: "accepted" } });
    assert.deepEqual(await agent.ack(command_id, "not-the-lease"), { status: 409, body: { error: "lease_mismatch" } });
  }
  assert.deepEqual(delivered, ["first", "second", "third"]);
  const listed = await operator.list();
  assert.deepEqual(
    listed.body.commands.map((c: CommandSummary) => c.command_id),
    [...ids].reverse(),
  );
  assert.ok(listed.body.commands.every((c: CommandSummary) => c.state === "accepted" && !c.cancellable));
});

test("a repeated request key returns the same command; other content under it is refused", async (t) => {
  const { operator } = await onlineServer(t);
  const image = imageOf("image/png", 64, 1);
  const body = { session_id: "s-1", instruction: "look at this", images: [image], request_key: "call-1" };

  const first = await operator.create(body);
  const again = await operator.create(body);
  assert.equal(first.status, 201);
  assert.equal(again.status, 200);
  assert.equal(again.body.duplicate, true);
  assert.equal(again.body.command.command_id, first.body.command.command_id);

  const conflicts: [string, Record<string, unknown>][] = [
    ["other text", { ...body, instruction: "look at that" }],
    ["other image bytes", { ...body, images: [imageOf("image/png", 64, 2)] }],
    ["no images", { ...body, images: undefined }],
  ];
  for (const [name, variant] of conflicts) {
    assert.deepEqual(await operator.create(variant), { status: 422, body: { error: "idempotency_key_reused" } }, name);
  }
  assert.equal((await operator.list()).body.commands.length, 1);
});

test("cancel works only before the first claim, and answers why afterwards", async (t) => {
  const { agent, operator } = await onlineServer(t);

  const doomed = (await operator.create({ session_id: "s-1", instruction: "never mind" })).body.command.command_id;
  const kept = (await operator.create({ session_id: "s-1", instruction: "do it" })).body.command.command_id;
  assert.deepEqual(await operator.cancel(doomed), { status: 200, body: { state: "cancelled" } });
  assert.deepEqual(await operator.cancel(doomed), { status: 200, body: { state: "cancelled" } });
  assert.deepEqual(await operator.cancel(doomed, "s-other"), { status: 404, body: { error: "not_found" } });

  const claimed = await agent.claim();
  assert.equal(claimed.body.command.command_id, kept, "a cancelled command is never handed out");
  assert.deepEqual(await operator.cancel(kept), { status: 409, body: { error: "delivery_started" } });
  await agent.ack(kept, claimed.body.lease.token);
  assert.deepEqual(await operator.cancel(kept), { status: 409, body: { error: "already_accepted" } });
  assert.deepEqual((await agent.claim()).body, { command: null });

  const states = Object.fromEntries((await operator.list()).body.commands.map((c: CommandSummary) => [c.command_id, c.state]));
  assert.deepEqual(states, { [doomed]: "cancelled", [kept]: "accepted" });
});

test("an expired lease is redelivered, is no longer cancellable, and only the newest lease can ACK", async (t) => {
  const { agent, operator } = await onlineServer(t, { config: { commandLeaseMs: 300 } });
  const { command_id } = (await operator.create({ session_id: "s-1", instruction: "once" })).body.command;

  const first = await agent.claim();
  assert.equal(first.body.command.command_id, command_id);
  // The long poll is woken by the lease sweep once the lease has run out.
  const second = await agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs });
  assert.equal(second.body.command?.command_id, command_id);
  assert.notEqual(second.body.lease.token, first.body.lease.token);

  const [summary] = (await operator.list()).body.commands;
  assert.equal(summary.cancellable, false);
  assert.deepEqual(await operator.cancel(command_id), { status: 409, body: { error: "delivery_started" } });
  assert.deepEqual(await agent.ack(command_id, first.body.lease.token), { status: 409, body: { error: "lease_mismatch" } });
  assert.deepEqual(await agent.ack(command_id, second.body.lease.token), { status: 200, body: { state: "accepted" } });
});

test("a leased instruction stays with the runtime that leased it; the next runtime gets it only after the lease ran out, and the trail says so", async (t) => {
  const server = await startServer({ config: { sessionHeartbeatTimeoutMs: 1000, commandLeaseMs: 4000, heartbeatsPerMinute: 60_000, heartbeatBurst: 1000 } });
  t.after(() => server.stop());
  const agent = agentApi(server);
  const operator = operatorApi(server);
  await agent.heartbeat({ runtime_id: "r-crashed" });
  const { command_id } = (await operator.create({ session_id: "s-1", instruction: "survive a restart" })).body.command;
  const lost = await agent.claim("s-1", "r-crashed");
  assert.equal(lost.body.command.command_id, command_id);
  const leaseEnds = Date.parse(lost.body.lease.expires_at);

  await waitUntil(
    async () => ((await agent.heartbeat({ runtime_id: "r-restarted" })).status === 200 ? true : undefined),
    "r-restarted registered after r-crashed expired",
  );
  if (Date.now() < leaseEnds - 500) assert.deepEqual((await agent.claim("s-1", "r-restarted")).body, { command: null }, "not while r-crashed's lease runs");
  const taken = await waitUntil(async () => {
    await agent.heartbeat({ runtime_id: "r-restarted" }); // its own TTL is 1 s
    const claim = await agent.claim("s-1", "r-restarted");
    return claim.body.command ? claim : undefined;
  }, "handed on once the lease ran out");
  assert.equal(taken.body.command.command_id, command_id);
  assert.ok(Date.now() >= leaseEnds, "never before the lease's end");
  const trail = await operator.audit({ limit: "200" });
  const rebound = (trail.body.entries as { action: string; subject: string; data: Record<string, unknown> }[]).filter((e) => e.action === "command.rebound");
  assert.deepEqual(
    rebound.map((e) => [e.subject, e.data.from_runtime_id, e.data.to_runtime_id]),
    [[command_id, "r-crashed", "r-restarted"]],
  );
  assert.deepEqual(await agent.ack(command_id, lost.body.lease.token, "s-1", "r-crashed"), { status: 409, body: { error: "lease_mismatch" } });
  assert.deepEqual(await agent.ack(command_id, taken.body.lease.token, "s-1", "r-restarted"), { status: 200, body: { state: "accepted" } });
});

test("leases, tombstones and request keys survive a server restart; the registry does not", async (t) => {
  const { server, agent, operator } = await onlineServer(t);
  const leasedId = (await operator.create({ session_id: "s-1", instruction: "in flight" })).body.command.command_id;
  const cancelledBody = { session_id: "s-1", instruction: "withdrawn", request_key: "k-cancel" };
  const cancelledId = (await operator.create(cancelledBody)).body.command.command_id;
  await operator.cancel(cancelledId);
  const lease = await agent.claim();
  assert.equal(lease.body.command.command_id, leasedId);

  await server.restart();

  assert.deepEqual((await operator.sessions()).body.sessions, [], "presence is memory only");
  assert.deepEqual(await agent.claim(), { status: 409, body: { error: "session_offline" } });
  const replay = await operator.create(cancelledBody);
  assert.equal(replay.status, 200);
  assert.deepEqual([replay.body.command.command_id, replay.body.command.state, replay.body.duplicate], [cancelledId, "cancelled", true]);
  // The Pi side delivered it before the restart; its ACK still lands.
  assert.deepEqual(await agent.ack(leasedId, lease.body.lease.token), { status: 200, body: { state: "accepted" } });
  await agent.heartbeat();
  assert.deepEqual((await agent.claim()).body, { command: null }, "the cancelled command never comes back");
});

test("a proactive message to an offline session is refused and nothing is queued", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const agent = agentApi(server);
  const operator = operatorApi(server);

  assert.deepEqual(await operator.create({ session_id: "s-1", instruction: "hello?" }), { status: 409, body: { error: "session_offline" } });
  await agent.heartbeat();
  await agent.offline("s-1", "r-1");
  assert.deepEqual(await operator.create({ session_id: "s-1", instruction: "hello?" }), { status: 409, body: { error: "session_offline" } });
  assert.deepEqual((await operator.list()).body.commands, []);
});

test("a long poll is answered as soon as a command for its session is created", async (t) => {
  const { agent, operator } = await onlineServer(t);
  await agent.heartbeat({ session_id: "s-2", runtime_id: "r-2" });

  const polling = agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs });
  // A command for another session must not answer this poll.
  await operator.create({ session_id: "s-2", instruction: "not yours" });
  await operator.create({ session_id: "s-1", instruction: "wake up" });
  const answer = await polling;
  assert.equal(answer.status, 200);
  assert.equal(answer.body.command?.instruction, "wake up");
});

/**
 * Resolves once a claim has read the session's queue (its wake-up watch is taken before that read,
 * and nothing but microtasks follow until it waits), so a request sent afterwards finds it held.
 */
function nextQueueRead(server: KoishiHarness): Promise<void> {
  const db = server.app.database;
  const original = db.get;
  return new Promise((resolve) => {
    db.get = async function (this: unknown, ...args: Parameters<typeof original>) {
      const rows = await original.apply(this, args);
      const [table, query] = args as unknown as [string, { state?: unknown }];
      if (table === COMMAND_TABLE && Array.isArray(query?.state)) {
        db.get = original;
        resolve();
      }
      return rows;
    } as typeof original;
  });
}

test("an ACK wakes a long poll held behind that lease, which then gets the next command", async (t) => {
  const { server, agent, operator } = await onlineServer(t);
  await operator.create({ session_id: "s-1", instruction: "first" });
  const next = (await operator.create({ session_id: "s-1", instruction: "second" })).body.command.command_id;
  const first = await agent.claim();
  assert.equal(first.body.command.instruction, "first");

  const held = nextQueueRead(server);
  const polling = agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs });
  await held;
  assert.equal((await agent.ack(first.body.command.command_id, first.body.lease.token)).status, 200);
  // Bounded by polls, not by the poll's own wait: unwoken, it would take the command only at its end.
  await waitUntil(async () => {
    const listed = (await operator.list()).body.commands as CommandSummary[];
    return listed.find((c) => c.command_id === next)?.state === "leased" ? true : undefined;
  }, "the held claim leased the next command after the ACK");
  const answer = await polling;
  assert.equal(answer.status, 200);
  assert.equal(answer.body.command?.command_id, next);
});

const LEAVING = "x-test-leaving-claim";

/** A long poll for s-1/r-1 marked as the one whose client will leave; it rejects when aborted. */
function leavingClaim(server: KoishiHarness, client: AbortController): Promise<unknown> {
  const query = new URLSearchParams({ session_id: "s-1", runtime_id: "r-1", capabilities: "images", wait_ms: String(LIMITS.longPollMaxMs) });
  return fetch(`${server.baseUrl}/commands?${query}`, { headers: { authorization: `Bearer ${server.token}`, [LEAVING]: "1" }, signal: client.signal });
}

/**
 * The moment the fix is about: the next lease is stored, then (after `meanwhile`) the marked
 * claim's client goes away and the server sees its connection close, all before that claim answers.
 */
function leaveAfterNextLease(server: KoishiHarness, client: AbortController, meanwhile: () => Promise<void> = async () => {}): void {
  const db = server.app.database;
  const original = db.set;
  const http = server.app.server._http;
  let leaving: ServerResponse | undefined;
  const onRequest = (request: IncomingMessage, response: ServerResponse) => {
    if (request.headers[LEAVING]) leaving = response;
  };
  http.on("request", onRequest);
  db.set = async function (this: unknown, ...args: Parameters<typeof original>) {
    const result = await original.apply(this, args);
    const [table, , patch] = args as unknown as [string, unknown, { state?: unknown }];
    if (table === COMMAND_TABLE && patch?.state === "leased") {
      db.set = original;
      http.off("request", onRequest);
      await meanwhile();
      assert.ok(leaving, "the leased claim is the marked one");
      const closed = once(leaving, "close");
      client.abort();
      await closed;
    }
    return result;
  } as typeof original;
}

async function commandTrail(server: KoishiHarness, commandId: string): Promise<AuditEntry[]> {
  const answer = await operatorApi(server).audit({ session_id: "s-1", limit: "200" });
  return AuditPage.parse(answer.body)
    .entries.filter((e) => e.subject === commandId && e.action.startsWith("command."))
    .reverse();
}

test("a claim whose client left before the answer is rolled back: pending, still cancellable, on the audit trail", async (t) => {
  const { server, operator } = await onlineServer(t);
  const client = new AbortController();
  leaveAfterNextLease(server, client);
  const held = nextQueueRead(server);
  const left = assert.rejects(leavingClaim(server, client), { name: "AbortError" });
  await held;
  const { command_id } = (await operator.create({ session_id: "s-1", instruction: "nobody heard this" })).body.command;
  await left;

  const trail = await waitUntil(async () => {
    const entries = await commandTrail(server, command_id);
    return entries.length >= 3 ? entries : undefined;
  }, "the roll-back is on the audit trail");
  assert.deepEqual(
    trail.map((e) => [e.action, e.actor]),
    [
      ["command.pending", "operator"],
      ["command.leased", "agent"],
      ["command.pending", "server"],
    ],
  );
  assert.equal(trail[2]!.data.claim_rolled_back, "client_gone");
  const [summary] = (await operator.list()).body.commands as CommandSummary[];
  assert.deepEqual([summary!.state, summary!.cancellable], ["pending", true], "it never left the server");
  assert.deepEqual(await operator.cancel(command_id), { status: 200, body: { state: "cancelled" } });
});

test("a claim waiting behind a rolled-back one gets the command at once", async (t) => {
  const { server, agent, operator } = await onlineServer(t);
  const { command_id } = (await operator.create({ session_id: "s-1", instruction: "second chance" })).body.command;
  const client = new AbortController();
  let waiting: ReturnType<typeof agent.claim> | undefined;
  leaveAfterNextLease(server, client, async () => {
    // The command is leased to the leaving claim; this one reaches the server and waits its session's turn.
    const arrived = once(server.app.server._http, "request");
    waiting = agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs });
    await arrived;
  });
  await assert.rejects(leavingClaim(server, client), { name: "AbortError" });

  // Bounded by polls, not by the held claim's own wait, at whose end it would also take the command.
  await waitUntil(
    async () => ((await commandTrail(server, command_id)).filter((e) => e.action === "command.leased").length === 2 ? true : undefined),
    "the held claim leased the command again",
  );
  const answer = await waiting!;
  assert.equal(answer.status, 200);
  assert.equal(answer.body.command?.command_id, command_id);
  assert.deepEqual(await agent.ack(command_id, answer.body.lease.token), { status: 200, body: { state: "accepted" } });
});

test("a long poll with nothing to deliver answers null when its wait ends", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const agent = agentApi(server);
  await agent.heartbeat();
  assert.deepEqual(await agent.claim("s-1", "r-1", { waitMs: 50 }), { status: 200, body: { command: null } });
});

test("the waker wakes only its session's watches, and closing releases every watch", async () => {
  const waker = new LongPollWaker();
  const fired: string[] = [];
  const a = waker.watch("s-1");
  const b = waker.watch("s-2");
  void a.fired.then(() => fired.push("s-1"));
  void b.fired.then(() => fired.push("s-2"));
  waker.wake("s-1");
  await a.fired;
  assert.deepEqual(fired, ["s-1"]);
  waker.close();
  await b.fired;
  assert.deepEqual(fired, ["s-1", "s-2"]);
  // After close a watch fires at once, so a request arriving during disposal is not held.
  await waker.watch("s-3").fired;
  assert.equal(waker.closed, true);
});

test("bad claim and ack requests get clear errors", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const agent = agentApi(server);
  await agent.heartbeat();
  const tooLong = await agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs + 1 });
  assert.equal(tooLong.status, 400);
  assert.equal(tooLong.body.error, "invalid_request");
  const unknown = await agent.ack("c-unknown", "token");
  assert.deepEqual(unknown, { status: 404, body: { error: "not_found" } });
});

test("images: every per-command limit is checked before anything is queued", async (t) => {
  const { operator } = await onlineServer(t);
  const png = (bytes: number) => imageOf("image/png", bytes);
  const cases: [string, unknown[], string][] = [
    ["five images", Array.from({ length: 5 }, () => png(10)), "invalid_request"],
    ["an image one byte over 4 MiB", [png(LIMITS.imageBytes + 1)], "invalid_image"],
    ["images over 8 MiB together", [png(LIMITS.imageBytes), png(LIMITS.imageBytes), png(16)], "invalid_image"],
    ["bytes that are not the declared type", [{ ...png(100), mime_type: "image/gif" }], "invalid_image"],
    ["a data: URL instead of raw base64", [{ mime_type: "image/png", data: `data:image/png;base64,${png(10).data}` }], "invalid_request"],
    ["a remote URL", [{ mime_type: "image/png", data: "https://example.com/a.png" }], "invalid_request"],
    ["an unsupported type", [{ mime_type: "image/svg+xml", data: png(10).data }], "invalid_request"],
  ];
  for (const [name, images, error] of cases) {
    const answer = await operator.create({ session_id: "s-1", instruction: "see", images });
    assert.equal(answer.status, 400, name);
    assert.equal(answer.body.error, error, name);
  }
  const atLimits = await operator.create({ session_id: "s-1", instruction: "see", images: [png(LIMITS.imageBytes), imageOf("image/webp", LIMITS.imageBytes)] });
  assert.equal(atLimits.status, 201, "exactly 4 MiB each and 8 MiB together is allowed");
  assert.equal((await operator.list()).body.commands.length, 1);
});

test("images: the budget counts pending and leased commands and is released at final states", async (t) => {
  const { server, agent, operator } = await onlineServer(t, { config: { commandImageBudgetBytes: 1400 } });
  const withImage = (instruction: string) => operator.create({ session_id: "s-1", instruction, images: [imageOf("image/jpeg", 800)] });

  const first = await withImage("first");
  assert.equal(first.status, 201);
  assert.deepEqual(await withImage("second"), { status: 507, body: { error: "image_budget_exceeded" } });
  assert.equal((await operator.create({ session_id: "s-1", instruction: "text still fits" })).status, 201);

  await operator.cancel(first.body.command.command_id);
  const second = await withImage("second");
  assert.equal(second.status, 201, "a cancelled command no longer counts");

  const text = await agent.claim();
  assert.equal(text.body.command.instruction, "text still fits");
  await agent.ack(text.body.command.command_id, text.body.lease.token);
  const claimed = await agent.claim();
  assert.equal(claimed.body.command.command_id, second.body.command.command_id, "leased still counts");
  assert.deepEqual(await withImage("third"), { status: 507, body: { error: "image_budget_exceeded" } });
  await agent.ack(claimed.body.command.command_id, claimed.body.lease.token);
  assert.equal((await withImage("third")).status, 201, "an accepted command no longer counts");

  const rows = await server.app.database.get("anon_notify_command", { command_id: [first.body.command.command_id, second.body.command.command_id] });
  assert.equal(rows.length, 2);
  for (const row of rows) {
    assert.deepEqual(row.images, [], `${row.state} keeps no image bytes`);
    assert.deepEqual([row.image_count, row.image_bytes, row.image_digest?.length], [1, 800, 64]);
  }
});

test("images: a client without the capability never gets an image command", async (t) => {
  const { agent, operator } = await onlineServer(t);
  const image = imageOf("image/gif", 256, 7);
  const imageId = (await operator.create({ session_id: "s-1", instruction: "with picture", images: [image] })).body.command.command_id;
  await operator.create({ session_id: "s-1", instruction: "text only" });

  const text = await agent.claim("s-1", "r-1", { images: false });
  assert.equal(text.body.command.instruction, "text only", "the image command does not block text for an old client");
  await agent.ack(text.body.command.command_id, text.body.lease.token);
  assert.deepEqual((await agent.claim("s-1", "r-1", { images: false })).body, { command: null });

  const withImages = await agent.claim("s-1", "r-1", { images: true });
  assert.equal(withImages.body.command.command_id, imageId);
  assert.deepEqual(withImages.body.command.images, [image]);

  await agent.heartbeat({ session_id: "s-old", runtime_id: "r-old", supports_images: true, command_protocol: 1 });
  await agent.heartbeat({ session_id: "s-plain", runtime_id: "r-plain", supports_images: false });
  for (const session_id of ["s-old", "s-plain"]) {
    assert.deepEqual(
      await operator.create({ session_id, instruction: "see", images: [image] }),
      { status: 409, body: { error: "images_not_supported" } },
      session_id,
    );
    const claimed = await agent.claim(session_id, session_id.replace("s-", "r-"), { images: true });
    assert.deepEqual(claimed.body, { command: null });
  }
});

/**
 * The presence, command and operator parts composed on a real Koishi app around `registry`, so a
 * test can move the registry's clock instead of waiting out a real TTL.
 */
async function startParts(t: TestContext, registry: SessionRegistry): Promise<ApiTarget> {
  const token = "agent-token-for-parts";
  const server = await startKoishi({
    withoutPlugin: true,
    plugins: (use) => {
      use({
        name: "presence-and-commands",
        inject: ["server", "database"],
        apply(ctx: Context) {
          const api = new HttpApi({ agentToken: token, operatorToken: OPERATOR_TOKEN });
          const audit = new AuditLog(ctx);
          const commands = new CommandStore(ctx, { leaseMs: 60_000, imageBudgetBytes: LIMITS.imageBudgetBytes, stopTtlMs: 30_000, audit });
          const operator = new OperatorService({
            registry,
            commands,
            audit,
            mutes: new MuteStore(ctx),
            eventSession: async () => undefined,
            messageNotices: async () => [],
            eventsWaiting: async () => ({ persona: 0, held: 0 }),
          });
          ctx.plugin(SessionRoutes, { api, registry, limit: { perMinute: 600, burst: 120 }, totalLimit: { perMinute: 6000, burst: 1000 } });
          ctx.plugin(CommandRoutes, { api, registry, hosts: new HostRegistry(60_000), commands, sweepMs: 30_000, pollCaps: { perSession: 4, total: 256 } });
          ctx.plugin(OperatorRoutes, { api, operator });
        },
      });
    },
  });
  t.after(() => server.stop());
  return { baseUrl: server.baseUrl, token };
}

test("a session whose heartbeats stop expires after the server's TTL and can no longer claim", async (t) => {
  const clock = { ms: Date.parse("2026-11-30T03:00:00.000Z") };
  const server = await startParts(t, new SessionRegistry(1000, () => clock.ms));
  const agent = agentApi(server);
  const operator = operatorApi(server);
  assert.equal((await agent.heartbeat()).body.ttl_ms, 1000);
  clock.ms += 999;
  assert.equal((await operator.sessions()).body.sessions.length, 1);
  assert.deepEqual(await agent.claim(), { status: 200, body: { command: null } });
  clock.ms += 1;
  assert.deepEqual((await operator.sessions()).body.sessions, []);
  assert.deepEqual(await agent.claim(), { status: 409, body: { error: "session_offline" } });
});

test("concurrent claims lease a command once, and a cancel racing a claim never both win", async (t) => {
  const { agent, operator } = await onlineServer(t);

  await operator.create({ session_id: "s-1", instruction: "only once" });
  const claims = await Promise.all(Array.from({ length: 6 }, () => agent.claim()));
  const winners = claims.filter((c) => c.body.command);
  assert.equal(winners.length, 1);
  await agent.ack(winners[0]!.body.command.command_id, winners[0]!.body.lease.token);

  for (let round = 0; round < 10; round++) {
    const { command_id } = (await operator.create({ session_id: "s-1", instruction: `race ${round}` })).body.command;
    const [cancel, claim] = await Promise.all([operator.cancel(command_id), agent.claim()]);
    const cancelled = cancel.status === 200;
    const claimed = claim.body.command?.command_id === command_id;
    assert.ok(cancelled !== claimed, `round ${round}: cancel ${cancel.status} ${JSON.stringify(cancel.body)}, claim ${JSON.stringify(claim.body)}`);
    if (claimed) {
      assert.deepEqual(cancel.body, { error: "delivery_started" });
      await agent.ack(command_id, claim.body.lease.token);
    }
  }
});
