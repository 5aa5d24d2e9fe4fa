/**
 * One owner, many sessions: the pace of approval requests to the owner by table, then through the
 * real plugin (plugin-mock's chat: no adapter matters here) — 80 sessions × 3 requests reach the
 * owner as at most the cap plus one digest, and every request is still listed and answerable.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { agentApi, approvalRequestOf, call, OPERATOR_TOKEN } from "../../harness/agent-api.ts";
import { startChat } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";
import { decideDigest, decideRequestPace } from "../../server/approvals/owner-pace-rules.ts";

const LIMIT = { cap: 3, windowMs: 60_000 };

test("a request goes out on its own only under the cap of the last window", () => {
  const table: [string, number[], number, "send" | "hold"][] = [
    ["none sent yet", [], 0, "send"],
    ["two in the window", [0, 1000], 2000, "send"],
    ["three in the window", [0, 1000, 2000], 3000, "hold"],
    ["the first has left the window", [0, 1000, 2000], 60_000, "send"],
    ["just inside the window", [0, 1000, 2000], 59_999, "hold"],
  ];
  for (const [name, sent, now, expected] of table) assert.equal(decideRequestPace(sent, now, LIMIT), expected, name);
});

test("a digest goes when a held request was not counted yet: at once the first time, then at most once a window, never for nothing new", () => {
  const told = (...ids: string[]) => new Set(ids);
  const table: [string, Parameters<typeof decideDigest>[0], ReturnType<typeof decideDigest>][] = [
    ["nothing held", { waiting: [], told: told(), lastAtMs: null, nowMs: 0 }, { kind: "none" }],
    ["the first held one", { waiting: ["a"], told: told(), lastAtMs: null, nowMs: 0 }, { kind: "send", count: 1 }],
    ["all already counted", { waiting: ["a", "b"], told: told("a", "b"), lastAtMs: 0, nowMs: 120_000 }, { kind: "none" }],
    ["some answered since, none new", { waiting: ["b"], told: told("a", "b"), lastAtMs: 0, nowMs: 120_000 }, { kind: "none" }],
    [
      "a new one within the window: wait for its end",
      { waiting: ["a", "c"], told: told("a"), lastAtMs: 10_000, nowMs: 20_000 },
      { kind: "wait", untilMs: 70_000 },
    ],
    ["a new one after the window: counts all waiting", { waiting: ["a", "c"], told: told("a"), lastAtMs: 10_000, nowMs: 70_000 }, { kind: "send", count: 2 }],
    ["answered all, then new ones: never silence", { waiting: ["x", "y"], told: told("a", "b", "c"), lastAtMs: 0, nowMs: 60_000 }, { kind: "send", count: 2 }],
  ];
  for (const [name, facts, expected] of table) assert.deepEqual(decideDigest(facts, LIMIT), expected, name);
});

test("80 sessions × 3 requests: at most the cap plus one digest reach the owner; every request is listed in anon.approvals and answerable by its code", {
  timeout: 240_000,
}, async (t) => {
  const CAP = 10;
  const chat = await startChat({ config: { approvalMessagesPerMinute: CAP, sessionHeartbeatTimeoutMs: 10 * 60_000 } });
  t.after(() => chat.stop());
  const agent = agentApi(chat);
  const sessions = Array.from({ length: 80 }, (_, i) => `s-${i}`);
  for (const id of sessions) assert.equal((await agent.heartbeat({ session_id: id, runtime_id: `r-${id}` })).status, 200);
  const startedAt = Date.now();
  const created = await Promise.all(
    sessions.flatMap((id) =>
      [1, 2, 3].map(async (n) => {
        const answer = await call(
          chat,
          "POST",
          "/approvals",
          approvalRequestOf({ session_id: id, runtime_id: `r-${id}`, run_id: `r-${id}.run.1`, tool_call_id: `call-${n}` }),
        );
        assert.equal(answer.status, 201, JSON.stringify(answer.body));
        return answer.body as { approval: { code: string; approval_id: string }; reach: string };
      }),
    ),
  );
  assert.equal(created.length, 240);
  const requests = () => chat.sent.filter((m) => /【Pi 审批 [A-Z]{5}】/.test(m.text));
  const digests = () => chat.sent.filter((m) => /^另有 \d+ 个审批请求在等你/.test(m.text));
  await waitUntil(() => (digests().length > 0 ? true : undefined), "the digest");
  const minutes = Math.floor((Date.now() - startedAt) / 60_000);
  // Past a full minute (a slow machine) the next window's cap may go out too: never more.
  assert.ok(requests().length >= CAP && requests().length <= CAP * (1 + minutes), `${requests().length} requests on their own in ${minutes} full minutes`);
  // A second digest may go only once a window has passed (a slow machine): never more.
  assert.ok(digests().length <= 1 + minutes, `${digests().length} digests in ${minutes} full minutes`);
  assert.match(
    digests()[0]!.text,
    /^另有 \d+ 个审批请求在等你（每分钟超过 10 个，没有逐个发送）：anon\.approvals 列出它们，逐个用 anon\.approve 审批码 或 anon\.deny 审批码 回答。$/,
  );
  assert.equal(chat.sent.length, requests().length + digests().length, "nothing else was sent");
  assert.ok(
    created.every((c) => c.reach === "sent" || c.reach === "queued"),
    "each request says truly how it reaches the owner",
  );

  // Every request is listed, a page at a time, and answerable by its code.
  const owner = chat.owner();
  const listed = new Set<string>();
  for (let page = 1; page <= 24; page++) {
    const [text] = await owner.receive(page === 1 ? "anon.approvals" : `anon.approvals ${page}`);
    if (page === 1) assert.match(text ?? "", /^待审批的请求（240 个）：/);
    if (page < 24) assert.match(text ?? "", new RegExp(`还有更多：anon\\.approvals ${page + 1}（共 24 页）`));
    for (const match of (text ?? "").matchAll(/^([A-Z]{5}) · /gm)) listed.add(match[1]!);
  }
  assert.deepEqual([...listed].sort(), created.map((c) => c.approval.code).sort(), "every request listed once");
  const last = created.at(-1)!.approval;
  assert.deepEqual(await owner.receive(`anon.approve ${last.code}`), [`已批准 ${last.code}（rm -rf），决定已发给 Pi。`]);
  const decided = await call(chat, "GET", `/operator/approvals/${last.approval_id}`, undefined, OPERATOR_TOKEN);
  assert.equal(decided.body.approval.state, "decided");
});
