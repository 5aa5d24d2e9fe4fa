/**
 * Authentication and secrecy of the standalone server (`npm start`, a child process): every route
 * answers 401 without a token or with a wrong one (operator routes also refuse the agents' token,
 * agent routes the operator's), the token files are 0600 and are never rewritten across restarts
 * (a token the user wrote is kept as is), and no token — nor a near-miss of one a client sent —
 * appears in the server's stdout/stderr (which carries the log persona's text), in any answer,
 * receipt or error, or in any audit row, after a session of ordinary and failing traffic. Each
 * route's refusals come from their own loopback address (127.0.0.x), below the per-address burst
 * of wrong tokens; a burst from one address then gets 429, one log line, and the right token still works.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, writeFile, mkdir } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent, request } from "undici";
import { freePort } from "../../harness/koishi.ts";
import { validEvent } from "../../harness/event-client.ts";
import { heartbeatOf } from "../../harness/agent-api.ts";
import { imageOf } from "../server/images.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";

/** Every route of docs/protocol.md with a path that exists, and the token it needs. */
const ROUTES: { method: "GET" | "POST" | "DELETE"; path: string; auth: "agent" | "operator" }[] = [
  { method: "POST", path: "/events", auth: "agent" },
  { method: "POST", path: "/events/batch", auth: "agent" },
  { method: "GET", path: "/events/pi:x:run:1", auth: "agent" },
  { method: "GET", path: "/health", auth: "agent" },
  { method: "GET", path: "/recipient", auth: "agent" },
  { method: "POST", path: "/sessions/heartbeat", auth: "agent" },
  { method: "POST", path: "/sessions/offline", auth: "agent" },
  { method: "GET", path: "/commands?session_id=s-1&runtime_id=r-1&wait_ms=0", auth: "agent" },
  { method: "POST", path: "/commands/c-1/ack", auth: "agent" },
  { method: "POST", path: "/audit/tool-calls", auth: "agent" },
  { method: "GET", path: "/operator/sessions", auth: "operator" },
  { method: "POST", path: "/operator/commands", auth: "operator" },
  { method: "GET", path: "/operator/commands?session_id=s-1", auth: "operator" },
  { method: "POST", path: "/operator/commands/c-1/cancel", auth: "operator" },
  { method: "GET", path: "/operator/audit", auth: "operator" },
  { method: "POST", path: "/operator/sessions/s-1/stop", auth: "operator" },
  { method: "GET", path: "/operator/mute", auth: "operator" },
  { method: "POST", path: "/operator/mute", auth: "operator" },
  { method: "DELETE", path: "/operator/mute", auth: "operator" },
  { method: "POST", path: "/approvals", auth: "agent" },
  { method: "POST", path: "/approvals/ap-1/resolution", auth: "agent" },
  { method: "GET", path: "/operator/approvals", auth: "operator" },
  { method: "POST", path: "/operator/approvals/ap-1/decision", auth: "operator" },
];

test("every route refuses a missing or wrong token; token files are 0600, never rewritten, and no token leaks anywhere", { timeout: 120_000 }, async (t) => {
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-auth-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  // A token the user chose is used as written; the operator token is generated.
  const agentToken = `user-chosen-${"k".repeat(40)}`;
  await mkdir(dataDir, { recursive: true });
  await writeFile(join(dataDir, "token"), `${agentToken}\n`, { mode: 0o600 });
  const port = await freePort();
  const dispatcher = new Agent({ connections: 2 });
  t.after(() => dispatcher.close());

  const servers: Standalone[] = [];
  const start = async () => {
    const started = await spawnStandalone(dataDir, port);
    servers.push(started);
    return started;
  };
  let server = await start();
  const operatorToken = (await readFile(join(dataDir, "operator.token"), "utf8")).trim();
  assert.match(operatorToken, /^[0-9a-f]{64}$/);
  assert.notEqual(operatorToken, agentToken);
  const files = async () =>
    Promise.all(
      ["token", "operator.token"].map(async (name) => {
        const info = await stat(join(dataDir, name));
        return { name, mode: info.mode & 0o777, mtimeMs: info.mtimeMs, ino: info.ino, text: await readFile(join(dataDir, name), "utf8") };
      }),
    );
  const before = await files();
  for (const file of before) assert.equal(file.mode, 0o600, `${file.name} is 0600`);
  assert.equal(before[0]!.text, `${agentToken}\n`, "the user's token file is untouched");
  assert.equal((await stat(dataDir)).mode & 0o777, 0o700, "the data folder is 0700");

  const answers: string[] = [];
  async function call(method: string, path: string, authorization: string | undefined, body?: unknown, from: Agent = dispatcher) {
    const response = await request(`${server.baseUrl}${path}`, {
      method: method as "GET",
      dispatcher: from,
      headers: { ...(authorization === undefined ? {} : { authorization }), "content-type": "application/json" },
      ...(body === undefined ? {} : { body: JSON.stringify(body) }),
    });
    const text = await response.body.text();
    answers.push(text);
    return { status: response.statusCode, text, body: text ? JSON.parse(text) : null };
  }

  const nearMiss = `${agentToken.slice(0, -1)}X`;
  const refusedCredentials = (auth: "agent" | "operator") => [
    undefined,
    "",
    "Bearer",
    "Bearer ",
    `Bearer ${nearMiss}`,
    `Bearer ${agentToken} extra`,
    `Basic ${Buffer.from(`user:${agentToken}`).toString("base64")}`,
    `Token ${auth === "agent" ? agentToken : operatorToken}`,
    `Bearer ${auth === "agent" ? operatorToken : agentToken}`,
    `Bearer ${operatorToken.toUpperCase()}`,
  ];
  let refusals = 0;
  for (const [index, route] of ROUTES.entries()) {
    // Wrong tokens are counted per address: each route's ten come from an address of their own.
    const from = new Agent({ connections: 2, localAddress: `127.0.0.${10 + index}` });
    t.after(() => from.close());
    for (const credential of refusedCredentials(route.auth)) {
      const answer = await call(route.method, route.path, credential, route.method === "GET" ? undefined : {}, from);
      assert.equal(
        answer.status,
        401,
        `${route.method} ${route.path} with ${credential === undefined ? "no header" : JSON.stringify(credential.slice(0, 12))}`,
      );
      assert.deepEqual(answer.body, { error: "unauthorized" });
      refusals++;
    }
  }

  // A burst from one address: 401 up to the burst, then 429 with Retry-After; the right token is still served.
  const guesser = new Agent({ connections: 2, localAddress: "127.0.0.9" });
  t.after(() => guesser.close());
  const burst: number[] = [];
  for (let i = 0; i < 40; i++) burst.push((await call("GET", "/health", `Bearer ${nearMiss}`, undefined, guesser)).status);
  assert.deepEqual(burst.slice(0, 20), Array(20).fill(401));
  assert.deepEqual(burst.slice(20), Array(20).fill(429));
  assert.equal((await call("GET", "/health", `Bearer ${agentToken}`, undefined, guesser)).status, 200, "the right token from the throttled address");

  // Ordinary and failing traffic with the right tokens, so logs, receipts and the trail have content.
  const agent = `Bearer ${agentToken}`;
  const operator = `Bearer ${operatorToken}`;
  assert.equal((await call("POST", "/sessions/heartbeat", agent, heartbeatOf())).status, 200);
  const anon = validEvent({ session_id: "s-1", summary: "完成了" });
  const direct = validEvent({ session_id: "s-1", delivery: "direct" });
  for (const event of [anon, direct]) assert.equal((await call("POST", "/events", agent, event)).status, 202);
  assert.equal((await call("POST", "/events", agent, { ...anon, summary: "changed" })).status, 422);
  assert.equal((await call("POST", "/events", agent, "{not json")).status, 400);
  const created = await call("POST", "/operator/commands", operator, { session_id: "s-1", instruction: "看一下", images: [imageOf("image/png", 100)] });
  assert.equal(created.status, 201);
  const second = await call("POST", "/operator/commands", operator, { session_id: "s-1", instruction: "撤回我" });
  const claim = await call("GET", "/commands?session_id=s-1&runtime_id=r-1&capabilities=images", agent);
  assert.equal(claim.body.command.command_id, created.body.command.command_id);
  assert.equal(
    (await call("POST", `/commands/${claim.body.command.command_id}/ack`, agent, { session_id: "s-1", runtime_id: "r-1", lease_token: "wrong" })).status,
    409,
  );
  assert.equal(
    (await call("POST", `/commands/${claim.body.command.command_id}/ack`, agent, { session_id: "s-1", runtime_id: "r-1", lease_token: claim.body.lease.token }))
      .status,
    200,
  );
  assert.equal((await call("POST", `/operator/commands/${second.body.command.command_id}/cancel`, operator, { session_id: "s-1" })).status, 200);
  assert.equal(
    (
      await call("POST", "/audit/tool-calls", agent, {
        session_id: "s-1",
        runtime_id: "r-1",
        tool: "report_progress",
        tool_call_id: "t-1",
        decision: "refused",
        reason: "rate",
        event_id: null,
        input: { token: agentToken, summary: "x" },
        created_at: new Date().toISOString(),
      })
    ).status,
    202,
  );
  // The worker has handed the anon event to the log persona and failed the direct one (no bot).
  await waitUntil(
    async () => ((await call("GET", `/events/${anon.event_id}`, agent)).body.state === "context_injected" ? true : undefined),
    "anon event injected",
  );
  await waitUntil(async () => ((await call("GET", `/events/${direct.event_id}`, agent)).body.state === "failed" ? true : undefined), "direct event failed");
  const audit = await call("GET", "/operator/audit?limit=200", operator);
  assert.ok(audit.body.entries.length >= 8, "the trail has rows to look through");

  // Restart twice: the token files are the same files with the same bytes.
  await server.stop();
  server = await start();
  await server.stop();
  server = await start();
  assert.deepEqual(await files(), before, "token files never rewritten");
  assert.equal((await call("GET", "/health", agent)).status, 200, "the kept token still works");
  await server.stop();

  const everything = { output: servers.map((s) => s.output()).join("\n"), answers: answers.join("\n") };
  const burstLines = everything.output.split("\n").filter((line) => /wrong tokens|错误 Token/.test(line));
  assert.equal(burstLines.length, 1, `one log line for the burst, none for the routes: ${burstLines.join(" | ")}`);
  assert.match(burstLines[0]!, /127\.0\.0\.9/);
  assert.match(everything.output, /EXTERNAL_AUTOMATION_EVENT/, "the log persona's text is in the captured output");
  for (const [where, text] of Object.entries(everything)) {
    for (const [name, secret] of Object.entries({ agentToken, operatorToken, nearMiss, leaseToken: claim.body.lease.token as string })) {
      if (where === "answers" && name === "leaseToken") continue; // handed to the claiming client, by design
      assert.ok(!text.includes(secret), `${name} does not appear in ${where}`);
    }
  }
  for (const secret of [agentToken, operatorToken, nearMiss, claim.body.lease.token]) assert.ok(!audit.text.includes(secret), "no token in the audit trail");
  t.diagnostic(
    `${ROUTES.length} routes × refused credentials: ${refusals} answers, all 401 unauthorized; 40 from one address: 20 × 401, 20 × 429; ${answers.length} answers, ${everything.output.length} characters of server output and ${audit.body.entries.length} audit rows without a token`,
  );
});
