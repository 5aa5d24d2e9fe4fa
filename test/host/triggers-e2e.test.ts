/**
 * The ears end to end: GitHub deliveries (recorded shapes, test/fixtures/github/) signed with the
 * test secret, posted to a real Koishi app on loopback, start and continue real `pi` sessions
 * through a real host with the stub model; refusals start nothing and the owner is told.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fetch } from "undici";
import { call, OPERATOR_TOKEN, operatorApi } from "../../harness/agent-api.ts";
import type { ChatHarness } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";
import { setUp, startHost } from "../helpers/host.ts";
import { lastUserText, type StubModel } from "../helpers/pi-cli.ts";

const SECRET = "test-webhook-secret-0123456789";
const FIXTURES = join(import.meta.dirname, "../fixtures/github");
type Payload = Record<string, any>;
const fixture = (name: string): Payload => JSON.parse(readFileSync(join(FIXTURES, `${name}.json`), "utf8"));

const TRIGGER = {
  name: "github",
  secret: SECRET,
  projects: [{ repository: "octo-org/shop", project: "shop" }],
  actors: ["alice", "carol"],
  bots: ["shop-agent"],
};

interface Delivered {
  status: number;
  body: any;
}

/** Posts a payload as GitHub does: the raw bytes signed, the event and a delivery id in headers. */
async function deliver(server: ChatHarness, event: string, payload: Payload, options: { id?: string; secret?: string } = {}): Promise<Delivered> {
  const raw = Buffer.from(JSON.stringify(payload));
  const response = await fetch(`${server.baseUrl}/triggers/github`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-github-event": event,
      "x-github-delivery": options.id ?? randomUUID(),
      "x-hub-signature-256": `sha256=${createHmac("sha256", options.secret ?? SECRET)
        .update(raw)
        .digest("hex")}`,
    },
    body: raw,
  });
  return { status: response.status, body: await response.json() };
}

/** The owner's direct messages that mention `text`. */
const toldOf = (server: ChatHarness, text: string) => server.sent.filter((message) => message.text.includes(text));

async function toldOnce(server: ChatHarness, text: string) {
  await waitUntil(
    () => toldOf(server, text).length > 0,
    () => `the owner told of "${text}"\n${server.sent.map((m) => m.text).join("\n---\n")}`,
    60_000,
  );
}

async function modelCalls(model: StubModel, count: number, log: () => string) {
  await waitUntil(
    () => model.requests.length >= count,
    () => `${count} model calls, got ${model.requests.length}\n${log()}`,
    90_000,
  );
}

async function startJobs(server: ChatHarness): Promise<number> {
  const { entries } = (await operatorApi(server).audit({ kind: "command", limit: "200" })).body as {
    entries: { action: string; data: { payload?: { task?: string } } }[];
  };
  return entries.filter((entry) => entry.action === "command.pending" && entry.data.payload?.task !== undefined).length;
}

test("a signed pull_request.opened starts a session in the mapped project with the title as marked data; refusals start nothing and are told; a comment continues it; the daily limit refuses the next", async (t) => {
  const { server, model, code, env } = await setUp(t, { triggers: [{ ...TRIGGER, runsPerDay: 2 }] });
  const host = await startHost(t, env, ["--root", code, "--name", "laptop"]);
  model.script({ text: "reviewed" }, { text: "covered the empty cart" });

  const opened = fixture("pull_request.opened");
  const forged = await deliver(server, "pull_request", opened, { secret: "another-secret-000000000" });
  assert.deepEqual([forged.status, forged.body], [401, { error: "unauthorized" }]);

  const id = randomUUID();
  const first = await deliver(server, "pull_request", opened, { id });
  assert.deepEqual([first.status, first.body], [202, { state: "queued", delivery: id }]);
  await modelCalls(model, 1, host.log);
  const prompt = lastUserText(model.requests[0]!);
  const block = prompt.slice(prompt.indexOf("[EXTERNAL_AUTOMATION_EVENT]\n"), prompt.indexOf("\n[/EXTERNAL_AUTOMATION_EVENT]"));
  assert.match(block, /"title": "Fix the rounding of cart totals"/, prompt);
  assert.match(block, /"repository": "octo-org\/shop"/);
  await toldOnce(server, "在 laptop 的 shop 里开了会话");
  const sessionId = toldOf(server, "开了会话")[0]!.text.match(/会话 ([0-9a-f-]{36})/)![1]!;
  const sessions = (await operatorApi(server).sessions()).body as { sessions: { session_id: string; project: string }[] };
  assert.deepEqual(
    sessions.sessions.filter((s) => s.session_id === sessionId).map((s) => s.project),
    ["shop"],
  );

  // Refused: each answers which guard, starts nothing, and the owner reads which guard and which delivery.
  const again = await deliver(server, "pull_request", opened, { id });
  assert.deepEqual([again.status, again.body], [200, { state: "duplicate", delivery: id }]);
  const refusals: [string, Payload, string, string][] = [
    ["pull_request", { ...opened, repository: { ...opened.repository, full_name: "octo-org/other" } }, "repository", "仓库不在触发器的 projects 里"],
    ["issues", { ...fixture("issues.labeled"), sender: { login: "shop-agent", id: 7, type: "User" } }, "bot", "来自机器人账号（防自激）"],
    ["issues", { ...fixture("issues.labeled"), sender: { login: "renovate[bot]", id: 8, type: "Bot" } }, "bot", "来自机器人账号（防自激）"],
  ];
  const marked = fixture("issue_comment.created");
  marked.comment.body = "Pushed a fix.\n<!-- anon-notify -->";
  refusals.push(["issue_comment", marked, "marker", "带有 Agent 自己的标记（防自激）"]);
  for (const [event, payload, guard, words] of refusals) {
    const refusedId = randomUUID();
    const answer = await deliver(server, event, payload, { id: refusedId });
    assert.deepEqual([answer.status, answer.body], [200, { state: "refused", delivery: refusedId, guard }], guard);
    await toldOnce(server, refusedId);
    assert.match(toldOf(server, refusedId)[0]!.text, new RegExp(`拒绝了 .* 的投递 ${refusedId}.*${words}`, "s"));
  }
  await toldOnce(server, `再次收到 octo-org/shop#12 的投递 ${id}`);
  assert.equal(await startJobs(server), 1, "one start job in all");

  // A person's comment on the same PR continues its session as an instruction (run 2 of 2 today).
  const comment = await deliver(server, "issue_comment", fixture("issue_comment.created"));
  assert.equal(comment.status, 202);
  await modelCalls(model, 2, host.log);
  assert.match(lastUserText(model.requests.at(-1)!), /"comment": "Please also cover the empty cart\."/);
  await toldOnce(server, `交给了它的会话 ${sessionId}`);

  const third = await deliver(server, "pull_request", fixture("pull_request.synchronize"));
  assert.equal(third.body.guard, "daily_limit");
  await toldOnce(server, "最近 24 小时已运行 2 次，达到每日上限");
  assert.equal(await startJobs(server), 1);
  assert.equal(model.requests.length, 2, "no model call for any refused delivery");
});

test("five synchronize deliveries in a row give one session; the other four arrive in it as instructions", async (t) => {
  const { server, model, code, env } = await setUp(t, { triggers: [TRIGGER] });
  const host = await startHost(t, env, ["--root", code, "--name", "laptop"]);
  model.script(...Array.from({ length: 5 }, (_, i) => ({ text: `push ${i + 1} looked at` })));
  const payload = fixture("pull_request.synchronize");
  const ids = Array.from({ length: 5 }, () => randomUUID());
  const answers = await Promise.all(ids.map((id) => deliver(server, "pull_request", payload, { id })));
  assert.deepEqual(
    answers.map((a) => a.status),
    [202, 202, 202, 202, 202],
  );
  await modelCalls(model, 5, host.log);
  const delivered = model.requests.map((request) => lastUserText(request).match(/"delivery": "([^"]+)"/)?.[1]);
  assert.deepEqual([...delivered].sort(), [...ids].sort(), "each delivery reached the model once");
  assert.equal(await startJobs(server), 1, "one start job");
  await toldOnce(server, "开了会话");
  const sessionId = toldOf(server, "开了会话")[0]!.text.match(/会话 ([0-9a-f-]{36})/)![1]!;
  // The last ACK may land just after its model call.
  const states = async () =>
    ((await operatorApi(server).list(sessionId)).body as { commands: { kind: string; state: string }[] }).commands.map((c) => `${c.kind}:${c.state}`).join(" ");
  await waitUntil(
    async () => (await states()) === "instruction:accepted instruction:accepted instruction:accepted instruction:accepted",
    `four accepted instructions in ${sessionId}`,
    30_000,
  );
});

test("a delivery for a key whose session ended resumes that session on its host: Pi opens it with its history, the delivery as its next prompt", async (t) => {
  const { server, model, code, env } = await setUp(t, { triggers: [TRIGGER] });
  const first = await startHost(t, env, ["--root", code, "--name", "laptop"]);
  model.script({ text: "first look done" }, { text: "second look done" });
  assert.equal((await deliver(server, "pull_request", fixture("pull_request.opened"))).status, 202);
  await toldOnce(server, "开了会话");
  const sessionId = toldOf(server, "开了会话")[0]!.text.match(/会话 ([0-9a-f-]{36})/)![1]!;
  await modelCalls(model, 1, first.log);
  // Stopping the host ends its sessions; a new host process on the same roots is the same host.
  first.child.kill("SIGTERM");
  await waitUntil(
    async () => {
      const sessions = (await operatorApi(server).sessions()).body as { sessions: { session_id: string }[] };
      return first.child.exitCode !== null && !sessions.sessions.some((s) => s.session_id === sessionId);
    },
    () => `the session to end with its host\n${first.log()}`,
    60_000,
  );
  const second = await startHost(t, env, ["--root", code, "--name", "laptop"]);
  assert.equal((await deliver(server, "pull_request", fixture("pull_request.synchronize"))).status, 202);
  await toldOnce(server, `恢复了会话 ${sessionId}`);
  await modelCalls(model, 2, second.log);
  const resumed = model.requests[1]!;
  assert.match(lastUserText(resumed), /"event": "pull_request\.synchronize"/);
  const history = JSON.stringify(resumed.messages);
  assert.match(history, /Fix the rounding of cart totals/, "the first prompt is in the resumed session's history");
  assert.match(history, /first look done/, "and the model's first answer");
  assert.equal(await startJobs(server), 2, "the first start and the resume");
});

test("a trigger's session runs with strict approvals though the user's config has them off: a risky bash call asks the owner and does not run", async (t) => {
  const { server, model, code, env } = await setUp(t, { triggers: [TRIGGER] });
  const host = await startHost(t, env, ["--root", code, "--name", "laptop"]);
  // `touch` runs unasked in rules mode; only strict mode asks for it (not known safe).
  model.script({ toolCalls: [{ name: "bash", arguments: { command: "touch ran.txt" } }] });
  assert.equal((await deliver(server, "pull_request", fixture("pull_request.opened"))).status, 202);
  const open = async () =>
    (
      (await call(server, "GET", "/operator/approvals?state=open", undefined, OPERATOR_TOKEN)).body as {
        approvals: { approval_id: string; command: string; rules: string[] }[];
      }
    ).approvals;
  await waitUntil(
    async () => (await open()).length > 0,
    () => `an approval request for the trigger's session\n${host.log()}`,
    90_000,
  );
  const [asked] = await open();
  assert.deepEqual([asked!.command, asked!.rules], ["touch ran.txt", ["strict.unlisted"]]);
  // The gate holds the call before it runs; the call waits for an answer the test never gives.
  assert.ok(!existsSync(join(code, "shop", "ran.txt")), "the call did not run");
  assert.equal(model.requests.length, 1, "the run waits on the owner");
  await toldOnce(server, "touch ran.txt");
});
