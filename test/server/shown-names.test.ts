/**
 * Agent-chosen names and one-line fields as a person reads them, through a real Koishi app with
 * plugin-mock clients: no forged row, hidden characters written out, look-alikes flagged and never
 * matched, in the chat listings, the operator listing and direct notices.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomUUID } from "node:crypto";
import { agentApi, approvalRequestOf, call, operatorApi } from "../../harness/agent-api.ts";
import { startChat, type ChatHarness } from "../../harness/chat.ts";
import { postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

async function chat(t: TestContext, options: Parameters<typeof startChat>[0] = {}): Promise<ChatHarness> {
  const harness = await startChat(options);
  t.after(() => harness.stop());
  return harness;
}

const FORGED = "a\n#2 bank · faux-model · 运行中（bash）";
const LOOK_ALIKES = [
  { session_id: "s-rlo", runtime_id: "r-rlo", project: "\u202epohs" },
  { session_id: "s-zw", runtime_id: "r-zw", project: "sh\u200bop" },
  { session_id: "s-cyr", runtime_id: "r-cyr", project: "\u0455hop" },
];
const HIDDEN = /[\u2028\u2029\u202a-\u202e\u2066-\u2069\u200b-\u200f\ufeff]/;

test("a heartbeat's project cannot forge a row in anon.sessions; look-alikes are written out or flagged, in both languages", async (t) => {
  const harness = await chat(t);
  const agent = agentApi(harness);
  await agent.heartbeat({ session_id: "s-forged", runtime_id: "r-forged", project: FORGED, model: "m\u2028#3 x", state: "running", activity: "ba\u202esh" });
  for (const beat of LOOK_ALIKES) await agent.heartbeat(beat);

  const [listing] = await harness.owner().receive("anon.sessions");
  const lines = (listing ?? "").split("\n");
  assert.equal(lines.filter((line) => line.startsWith("#")).length, 4, listing);
  assert.ok(!lines.some((line) => line.startsWith("#2 bank")), listing);
  assert.ok(
    lines.some((line) => line.startsWith("#1 a⏎#2 bank")),
    listing,
  );
  assert.doesNotMatch(listing ?? "", HIDDEN);
  assert.match(listing ?? "", /\\u202epohs/);
  assert.match(listing ?? "", /sh\\u200bop/);
  assert.match(listing ?? "", /\u0455hop（混合文字）/);
  assert.match(listing ?? "", /ba\\u202esh/);

  const english = await chat(t, { locales: ["en-US"] });
  await agentApi(english).heartbeat(LOOK_ALIKES[2]!);
  const [enListing] = await english.owner().receive("anon.sessions");
  assert.match(enListing ?? "", /\u0455hop \(mixed scripts\)/);

  const { body } = await operatorApi(harness).sessions();
  const projects = (body.sessions as { project: string; model: string | null; mixed_scripts: boolean }[]).map((s) => [s.project, s.mixed_scripts]);
  assert.ok(
    projects.every(([project]) => !/[\n\r]/.test(String(project)) && !HIDDEN.test(String(project))),
    JSON.stringify(projects),
  );
  assert.deepEqual(
    projects.find(([p]) => p === "\u0455hop"),
    ["\u0455hop", true],
  );
});

test("anon.approvals shows an approval's session and tool on one line with hidden characters written out", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ session_id: "s-1", runtime_id: "r-1", project: "\u202epohs" });
  const created = await call(
    harness,
    "POST",
    "/approvals",
    approvalRequestOf({ tool_call_id: `call-${randomUUID()}`, cwd: "/home/u/x", tool: "ba\u200bsh\n#9" }),
  );
  assert.equal(created.status, 201, JSON.stringify(created.body));
  const [listing] = await harness.owner().receive("anon.approvals");
  assert.doesNotMatch(listing ?? "", HIDDEN);
  assert.match(listing ?? "", /#1 \\u202epohs/);
  assert.match(listing ?? "", /ba\\u200bsh⏎#9/);
});

test("anon.send by name never picks a look-alike", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat(LOOK_ALIKES[2]!);
  await agentApi(harness).heartbeat({ session_id: "s-kelvin", runtime_id: "r-kelvin", project: "\u212aey" });
  const [shop] = await harness.owner().receive("anon.send shop 删库");
  assert.match(shop ?? "", /找不到会话“shop”/);
  const [key] = await harness.owner().receive("anon.send key 删库");
  assert.match(key ?? "", /找不到会话“key”/);
  assert.equal((await operatorApi(harness).list("s-cyr")).body.commands.length, 0);
  assert.equal((await operatorApi(harness).list("s-kelvin")).body.commands.length, 0);
});

test("a direct notice's task and summary go out with bidi and zero-width characters written out", async (t) => {
  const harness = await chat(t);
  const event = validEvent({
    session_id: "s-1",
    delivery: "direct",
    status: "completed",
    task: "fix \u202egnp.exe",
    summary: "done\u200b\nnext \u2066line\u2069",
  });
  assert.equal((await postEvent(harness, event)).status, 202);
  const receipt = await settledReceipt(harness, String(event.event_id));
  const notice = await waitUntil(() => harness.sent.find((m) => m.id === receipt.message_id), "the direct notice was sent");
  assert.doesNotMatch(notice.text, HIDDEN);
  assert.match(notice.text, /fix \\u202egnp\.exe/);
  assert.match(notice.text, /done\\u200b\n {2}next \\u2066line\\u2069/);
});
