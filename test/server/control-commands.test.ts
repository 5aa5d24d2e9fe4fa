/**
 * Command protocol 3 on the real server (Koishi, plugin-server, SQLite): kinds, the control lane,
 * ACK outcomes, stop requests and their refusals, the stop time to live on an injected clock, and
 * how held claims follow the session's run state.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import type { Context } from "koishi";
import { AuditPage } from "../../protocol/audit.ts";
import { ClaimAnswer, type CommandSummary } from "../../protocol/queue.ts";
import { OperatorStopAnswer } from "../../protocol/operator.ts";
import { HeartbeatAnswer } from "../../protocol/sessions.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { AuditLog } from "../../server/audit/store.ts";
import { CommandStore } from "../../server/queue/store.ts";
import { MuteStore } from "../../server/mute/store.ts";
import { OperatorService } from "../../server/operator/service.ts";
import { SessionRegistry } from "../../server/sessions/registry.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { call, heartbeatOf, onlineServer, type operatorApi } from "../../harness/agent-api.ts";
import { waitUntil } from "../../harness/wait.ts";

async function commandTrail(operator: ReturnType<typeof operatorApi>, commandId: string) {
  const page = AuditPage.parse((await operator.audit({ session_id: "s-1", limit: "200" })).body);
  return page.entries.filter((e) => e.subject === commandId).reverse();
}

test("the server speaks command protocol 3 in /health and in every heartbeat answer", async (t) => {
  const { server, agent } = await onlineServer(t);
  const health = await call(server, "GET", "/health");
  assert.deepEqual(health.body.protocol, { events: 1, commands: 3 });
  const answer = await agent.heartbeat();
  assert.equal(answer.body.command_protocol, 3);
  assert.ok(HeartbeatAnswer.safeParse(answer.body).success);
});

test("a stop goes out on the control lane only, carries its kind and payload, and its ACK outcome is kept and audited", async (t) => {
  const { agent, operator } = await onlineServer(t);
  const requested = await operator.stop();
  assert.equal(requested.status, 202);
  const { command } = OperatorStopAnswer.parse(requested.body);
  assert.deepEqual(
    { kind: command.kind, state: command.state, outcome: command.outcome, origin: command.origin, preview: command.preview, cancellable: command.cancellable },
    { kind: "stop", state: "pending", outcome: null, origin: "operator", preview: "", cancellable: true },
  );

  assert.deepEqual((await agent.claim()).body, { command: null }, "a protocol-2 claim (no lane) never gets a control command");
  assert.deepEqual((await agent.claim("s-1", "r-1", { lane: "instructions" })).body, { command: null });
  const claimed = await agent.claim("s-1", "r-1", { lane: "control" });
  const parsed = ClaimAnswer.parse(claimed.body);
  assert.ok(parsed.command);
  assert.deepEqual([parsed.command.command_id, parsed.command.kind, parsed.command.payload, parsed.command.instruction], [command.command_id, "stop", {}, ""]);
  const token = claimed.body.lease.token as string;

  assert.deepEqual(await agent.ack(command.command_id, token), { status: 400, body: { error: "invalid_request" } }, "a control ACK must say what happened");
  assert.deepEqual(
    await agent.ack(command.command_id, token, "s-1", "r-1", "applied"),
    { status: 400, body: { error: "invalid_request" } },
    "not a stop's outcome",
  );
  assert.deepEqual(await agent.ack(command.command_id, token, "s-1", "r-1", "stopped"), { status: 200, body: { state: "accepted" } });
  assert.deepEqual(
    await agent.ack(command.command_id, token, "s-1", "r-1", "already_idle"),
    { status: 200, body: { state: "accepted" } },
    "a repeat is answered alike",
  );

  const [summary] = (await operator.list()).body.commands as CommandSummary[];
  assert.deepEqual([summary!.state, summary!.outcome], ["accepted", "stopped"], "the first outcome stays");
  const trail = await commandTrail(operator, command.command_id);
  assert.deepEqual(
    trail.map((e) => [e.action, e.actor]),
    [
      ["command.pending", "operator"],
      ["command.leased", "agent"],
      ["command.accepted", "agent"],
    ],
  );
  assert.equal(trail[2]!.data.outcome, "stopped");
  assert.equal(trail[0]!.data.kind, "stop");
});

test("an instruction's ACK carries no outcome", async (t) => {
  const { agent, operator } = await onlineServer(t);
  await operator.create({ session_id: "s-1", instruction: "hi" });
  const claimed = await agent.claim();
  const { command_id } = claimed.body.command;
  assert.deepEqual(await agent.ack(command_id, claimed.body.lease.token, "s-1", "r-1", "stopped"), { status: 400, body: { error: "invalid_request" } });
  assert.equal((await agent.ack(command_id, claimed.body.lease.token)).status, 200);
});

test("a stop is refused for an offline session and, with the reason, for an extension speaking protocol 2", async (t) => {
  const { agent, operator } = await onlineServer(t);
  assert.deepEqual(await operator.stop("s-nobody"), { status: 409, body: { error: "session_offline" } });
  await agent.heartbeat({ session_id: "s-old", runtime_id: "r-old", command_protocol: 2 });
  const old = await operator.stop("s-old");
  assert.equal(old.status, 409);
  assert.equal(old.body.error, "capability_missing");
  assert.match(old.body.issues[0].message, /protocol 2.*needs 3/);
  assert.deepEqual((await operator.list("s-old")).body.commands, [], "nothing was queued");
  assert.equal((await operator.stop("s-1")).status, 202);
});

test("control commands are handed out in creation order and never wait behind a leased instruction", async (t) => {
  const { agent, operator } = await onlineServer(t);
  await operator.create({ session_id: "s-1", instruction: "a long job" });
  const instruction = await agent.claim("s-1", "r-1", { lane: "instructions" });
  assert.ok(instruction.body.command, "the instruction is leased and not ACKed");
  const first = OperatorStopAnswer.parse((await operator.stop()).body).command.command_id;
  const second = OperatorStopAnswer.parse((await operator.stop()).body).command.command_id;

  const a = await agent.claim("s-1", "r-1", { lane: "control" });
  assert.equal(a.body.command?.command_id, first);
  assert.deepEqual((await agent.claim("s-1", "r-1", { lane: "control" })).body, { command: null }, "the control lease holds its own lane");
  await agent.ack(first, a.body.lease.token, "s-1", "r-1", "stopped");
  const b = await agent.claim("s-1", "r-1", { lane: "control" });
  assert.equal(b.body.command?.command_id, second);
  assert.deepEqual((await agent.claim("s-1", "r-1", { lane: "instructions" })).body, { command: null }, "the instruction lane still waits for its own ACK");
});

test("a control long poll is held while the session runs and woken by a stop; an instruction poll is not held while it runs", async (t) => {
  const { agent, operator } = await onlineServer(t);
  await agent.heartbeat({ state: "running" });
  let answered = false;
  const held = agent.claim("s-1", "r-1", { lane: "control", waitMs: LIMITS.longPollMaxMs }).finally(() => (answered = true));
  // Not answered at once while running: an instruction poll is, and it comes back first.
  assert.deepEqual((await agent.claim("s-1", "r-1", { lane: "instructions", waitMs: LIMITS.longPollMaxMs })).body, { command: null });
  assert.equal(answered, false, "the control poll is still held");
  const { command } = OperatorStopAnswer.parse((await operator.stop()).body);
  const answer = await held;
  assert.equal(answer.body.command?.command_id, command.command_id);
});

test("a held instruction poll is answered as soon as a heartbeat says the run started", async (t) => {
  const { agent } = await onlineServer(t);
  let answer: Awaited<ReturnType<typeof agent.claim>> | undefined;
  const held = agent.claim("s-1", "r-1", { waitMs: LIMITS.longPollMaxMs }).then((a) => (answer = a));
  // Held first (idle): the answer must not come before the running heartbeat.
  await agent.heartbeat({ state: "idle" });
  assert.equal(answer, undefined);
  await agent.heartbeat({ state: "running" });
  // Bounded far below the poll's own 25 s wait, at whose end it would also answer.
  await waitUntil(() => answer, "the held instruction poll answered after the running heartbeat", 10_000);
  await held;
  assert.deepEqual(answer!.body, { command: null });
});

/** The stores and the operator service on a real Koishi app and database, on a clock the test moves. */
async function partsOnClock(t: TestContext, stopTtlMs: number) {
  const clock = { ms: Date.parse("2026-11-30T03:00:00.000Z") };
  const registry = new SessionRegistry(3_600_000, () => clock.ms);
  let parts: { commands: CommandStore; operator: OperatorService } | undefined;
  const server = await startKoishi({
    withoutPlugin: true,
    plugins: (use) => {
      use({
        name: "commands-on-a-clock",
        inject: ["database"],
        apply(ctx: Context) {
          const audit = new AuditLog(ctx);
          const commands = new CommandStore(ctx, {
            leaseMs: 60_000,
            imageBudgetBytes: LIMITS.imageBudgetBytes,
            stopTtlMs,
            audit,
            now: () => new Date(clock.ms),
          });
          parts = {
            commands,
            operator: new OperatorService({
              registry,
              commands,
              audit,
              mutes: new MuteStore(ctx),
              eventSession: async () => undefined,
              messageNotices: async () => [],
              eventsWaiting: async () => ({ persona: 0, held: 0 }),
            }),
          };
        },
      });
    },
  });
  t.after(() => server.stop());
  registry.record(heartbeatOf());
  return { clock, ...parts! };
}

test("a stop not handed out within stopTtlMs is never handed out and is cancelled as expired", async (t) => {
  const { clock, commands, operator } = await partsOnClock(t, 30_000);
  const stale = await operator.requestStop("s-1", "operator");
  const waiting = operator.waitForCommandOutcome(stale.command_id, 60_000);

  clock.ms += 29_999;
  await commands.sweep();
  assert.equal((await commands.summary(stale.command_id))?.state, "pending", "still in time");
  clock.ms += 1;
  assert.deepEqual(await commands.claim("s-1", "r-1", false, undefined, "control"), { command: null }, "too old to stop anything");
  await commands.sweep();
  const final = await waiting;
  assert.deepEqual([final.state, final.cancel_reason, final.cancellable], ["cancelled", "expired", false]);

  // A fresh stop is unaffected and goes out.
  const fresh = await operator.requestStop("s-1", "operator");
  const claimed = await commands.claim("s-1", "r-1", false, undefined, "control");
  assert.equal(claimed.command?.command_id, fresh.command_id);
});

test("waitForCommandOutcome resolves with the outcome once ACKed, or with the current summary when its time is up", async (t) => {
  const { commands, operator } = await partsOnClock(t, 30_000);
  const stop = await operator.requestStop("s-1", "operator");
  assert.equal((await operator.waitForCommandOutcome(stop.command_id, 20)).state, "pending");
  const outcome = operator.waitForCommandOutcome(stop.command_id, 60_000);
  const claimed = await commands.claim("s-1", "r-1", false, undefined, "control");
  assert.ok(claimed.command);
  await commands.ack(stop.command_id, { session_id: "s-1", runtime_id: "r-1", lease_token: claimed.lease.token, outcome: "already_idle" });
  const final = await outcome;
  assert.deepEqual([final.state, final.outcome], ["accepted", "already_idle"]);
  await assert.rejects(operator.waitForCommandOutcome("c-unknown", 10), { code: "not_found" });
});

test("createControlCommand checks the payload of its kind", async (t) => {
  const { commands } = await partsOnClock(t, 30_000);
  await assert.rejects(commands.createControlCommand("s-1", "stop", { now: true }, "operator"), { code: "invalid_request" });
  await assert.rejects(commands.createControlCommand("s-1", "approval_decision", { approval_id: "a-1", decision: "maybe" }, "operator"), {
    code: "invalid_request",
  });
  const decision = await commands.createControlCommand(
    "s-1",
    "approval_decision",
    { approval_id: "a-1", decision: "approved", reason: null, binding: { tool_call_id: "t-1", args_digest: "ab".repeat(32), cwd: "/work" }, via: "operator" },
    "operator",
  );
  assert.equal(decision.kind, "approval_decision");
  const claimed = await commands.claim("s-1", "r-1", false, undefined, "control");
  assert.equal(claimed.command?.payload?.approval_id, "a-1");
  assert.deepEqual(await commands.claim("s-1", "r-1", false, undefined, "instructions"), { command: null });
});
