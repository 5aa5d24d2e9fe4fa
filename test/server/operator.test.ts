import { test } from "node:test";
import assert from "node:assert/strict";
import type { CommandSummary } from "../../protocol/queue.ts";
import { CancelAnswer, OperatorCommandList, OperatorSessionList } from "../../protocol/operator.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { OPERATOR_TOKEN, agentApi, call, onlineServer, operatorApi, startServer } from "../../harness/agent-api.ts";
import { imageOf } from "./images.ts";

test("the operator API is off without its own token, and never accepts the agents' token", async (t) => {
  const off = await startKoishi();
  t.after(() => off.stop());
  assert.deepEqual(await operatorApi(off, off.token).sessions(), { status: 403, body: { error: "operator_disabled" } });

  const on = await startServer();
  t.after(() => on.stop());
  for (const token of [on.token, "", `${OPERATOR_TOKEN}x`]) {
    assert.deepEqual(await operatorApi(on, token).sessions(), { status: 401, body: { error: "unauthorized" } });
  }
  assert.equal((await operatorApi(on).sessions()).status, 200);
  // And the operator token opens no agent route.
  assert.equal((await call(on, "POST", "/sessions/heartbeat", {}, OPERATOR_TOKEN)).status, 401);
});

test("with an event id a command answers that notice; the event must belong to the session", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const operator = operatorApi(server);
  const notice = {
    event_id: "pi:s-1:run:9",
    session_id: "s-1",
    source: "Pi Agent · demo",
    task: "t",
    status: "failed",
    summary: "tests failed",
    created_at: new Date().toISOString(),
  };
  assert.equal((await call(server, "POST", "/events", notice)).status, 202);

  const created = await operator.create({ session_id: "s-1", event_id: notice.event_id, instruction: "fix it" });
  assert.equal(created.status, 201, "an offline session still gets an answer to its own notice queued");
  assert.equal(created.body.command.event_id, notice.event_id);
  assert.deepEqual(await operator.create({ session_id: "s-2", event_id: notice.event_id, instruction: "x" }), {
    status: 409,
    body: { error: "event_session_mismatch" },
  });
  assert.deepEqual(await operator.create({ session_id: "s-1", event_id: "pi:unknown", instruction: "x" }), {
    status: 404,
    body: { error: "not_found" },
  });
});

test("listing is newest first, bounded, previews only, and of that session only", async (t) => {
  const { agent, operator } = await onlineServer(t);
  await agent.heartbeat({ session_id: "s-2", runtime_id: "r-2" });
  await operator.create({ session_id: "s-1", instruction: "leased one" });
  const claimed = await agent.claim();
  const image = imageOf("image/png", 64, 3);
  await operator.create({ session_id: "s-1", instruction: "with image", images: [image] });
  await operator.create({ session_id: "s-2", instruction: "secret of s-2" });

  const safe = await operator.list("s-1");
  assert.deepEqual(
    OperatorCommandList.parse(safe.body).commands.map((c) => [c.preview, c.state, c.image_count]),
    [
      ["with image", "pending", 1],
      ["leased one", "leased", 0],
    ],
  );
  const text = JSON.stringify(safe.body);
  assert.ok(!text.includes(claimed.body.lease.token), "no lease tokens");
  assert.ok(!text.includes("secret of s-2"), "nothing of other sessions");
  assert.ok(!text.includes(image.data), "no image bytes");

  for (let i = 0; i < LIMITS.commandListMax; i++) await operator.create({ session_id: "s-1", instruction: `n${i}` });
  const page = await operator.list("s-1", 3);
  assert.deepEqual(
    page.body.commands.map((c: CommandSummary) => c.preview),
    ["n49", "n48", "n47"],
  );
  const all = await operator.list("s-1", LIMITS.commandListMax);
  assert.equal(all.body.commands.length, LIMITS.commandListMax, "the 50 newest of 52");
  assert.equal(all.body.commands.at(-1).preview, "n0");
  assert.equal((await operator.list("s-1", LIMITS.commandListMax + 1)).status, 400);
});

test("the first command's long instruction is previewed in at most 200 characters", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  await agentApi(server).heartbeat();
  const operator = operatorApi(server);
  await operator.create({ session_id: "s-1", instruction: "长".repeat(LIMITS.instructionChars) });
  const [summary] = (await operator.list()).body.commands as CommandSummary[];
  assert.equal(Array.from(summary!.preview).length, LIMITS.previewChars);
});

test("sessions and cancel answers have the protocol's shapes; bad bodies get clear errors", async (t) => {
  const server = await startServer();
  t.after(() => server.stop());
  const operator = operatorApi(server);
  await agentApi(server).heartbeat();
  assert.ok(OperatorSessionList.safeParse((await operator.sessions()).body).success);
  const { command_id } = (await operator.create({ session_id: "s-1", instruction: "x" })).body.command;
  assert.ok(CancelAnswer.safeParse((await operator.cancel(command_id)).body).success);

  const bad: [string, Record<string, unknown>, number, string][] = [
    ["no instruction", { session_id: "s-1" }, 400, "invalid_request"],
    ["an instruction too long", { session_id: "s-1", instruction: "x".repeat(LIMITS.instructionChars + 1) }, 400, "invalid_request"],
    ["an unknown key", { session_id: "s-1", instruction: "x", recipient: "10001" }, 400, "invalid_request"],
  ];
  for (const [name, body, status, error] of bad) {
    const answer = await operator.create(body);
    assert.deepEqual([answer.status, answer.body.error], [status, error], name);
  }
  const huge = await operator.create({ session_id: "s-1", instruction: "x", images: [imageOf("image/png", LIMITS.operatorBodyBytes)] });
  assert.deepEqual([huge.status, huge.body.error], [413, "payload_too_large"]);
  assert.deepEqual(await operator.cancel("c-unknown"), { status: 404, body: { error: "not_found" } });
});
