/**
 * Approvals on the server: the pure decisions table by table, then the routes on a real Koishi app
 * (SQLite, plugin-server, a mock bot whose sends to the owner are recorded).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Context } from "koishi";
import { CODE_ALPHABET, type ApprovalResolution } from "../../protocol/approvals.ts";
import { decideDecision, decideExpiry, decideResolution, decideVanish, nextOutgoing, pickCode, type ApprovalRecord } from "../../server/approvals/decisions.ts";
import { closingText, requestText } from "../../server/approvals/message-rules.ts";
import { NOW, OWNER, binding, record, server, voice } from "./approval-fixtures.ts";
import { ApprovalStore } from "../../server/approvals/store.ts";
import { OPERATOR_TOKEN, approvalRequestOf, call, heartbeatOf } from "../../harness/agent-api.ts";
import { captureLog, startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { MockBot } from "./persona-standin.ts";
import type { StandInToolService } from "./yesimbot-tool-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

test("a person's decision: the first on a pending, unexpired, matching approval wins; everything else says why", () => {
  const decide = { decision: "approved" as const, reason: null, decidedBy: "operator", via: "operator" as const };
  const later = new Date(NOW.getTime() + 600_000);
  const table: [string, ApprovalRecord | undefined, typeof decide & { binding?: typeof binding }, Date, string][] = [
    ["pending", record(), decide, NOW, "apply"],
    ["pending, same binding", record(), { ...decide, binding }, NOW, "apply"],
    ["pending, other arguments", record(), { ...decide, binding: { ...binding, args_digest: "b".repeat(64) } }, NOW, "approval_mismatch"],
    ["pending, other cwd", record(), { ...decide, binding: { ...binding, cwd: "/elsewhere" } }, NOW, "approval_mismatch"],
    ["past its time", record(), decide, later, "approval_expired"],
    ["already decided", record({ state: "decided" }), decide, NOW, "already_decided"],
    ["approved", record({ state: "approved" }), decide, NOW, "already_decided"],
    ["rejected", record({ state: "rejected" }), decide, NOW, "already_decided"],
    ["timed out", record({ state: "timeout" }), decide, NOW, "approval_expired"],
    ["vanished", record({ state: "vanished" }), decide, NOW, "approval_expired"],
    ["unknown", undefined, decide, NOW, "not_found"],
  ];
  for (const [name, row, input, now, expected] of table) {
    const result = decideDecision(row, input, now);
    assert.equal(result.kind === "refuse" ? result.error : result.kind, expected, name);
  }
  const applied = decideDecision(record(), { ...decide, decision: "rejected", reason: "不行" }, NOW);
  assert.deepEqual(applied.kind === "apply" && [applied.from, applied.patch.state, applied.patch.decision, applied.patch.decision_reason], [
    "pending",
    "decided",
    "rejected",
    "不行",
  ]);
});

test("the agent's resolution is the truth: it closes open or vanished approvals once, and only from its own runtime", () => {
  const body: ApprovalResolution = { session_id: "s-1", runtime_id: "r-1", outcome: "approved", via: "terminal", reason: null };
  const table: [string, ApprovalRecord, ApprovalResolution, string, string?][] = [
    ["pending → approved in the terminal", record(), body, "apply", "approved"],
    ["decided in chat → approved", record({ state: "decided", decided_by: "operator", via: "chat" }), { ...body, via: "chat" }, "apply", "approved"],
    ["vanished → corrected", record({ state: "vanished" }), body, "apply", "approved"],
    ["approved → repeat", record({ state: "approved" }), body, "unchanged"],
    ["other runtime", record(), { ...body, runtime_id: "r-2" }, "not_found"],
    ["other session", record(), { ...body, session_id: "s-2" }, "not_found"],
  ];
  for (const [name, row, input, expected, state] of table) {
    const result = decideResolution(row, input, NOW);
    assert.equal(result.kind === "refuse" ? result.error : result.kind, expected, name);
    if (state) assert.equal(result.kind === "apply" && result.patch.state, state, name);
  }
  const terminal = decideResolution(record(), body, NOW);
  assert.equal(terminal.kind === "apply" && terminal.patch.decided_by, "terminal");
  assert.equal(decideVanish(record({ state: "decided" }), NOW).kind, "apply");
  assert.equal(decideVanish(record({ state: "approved" }), NOW).kind, "unchanged");
  assert.equal(decideExpiry(record(), new Date(NOW.getTime() + 600_000 + 59_000), 60_000).kind, "unchanged", "the agent gets a grace to say first");
  assert.equal(decideExpiry(record(), new Date(NOW.getTime() + 600_000 + 60_000), 60_000).kind, "apply");
});

test("what the owner is owed, in order; codes avoid look-alikes and open codes", () => {
  const table: [Partial<ApprovalRecord>, boolean, string | undefined][] = [
    [{}, true, "request"],
    [{ request_sent: true }, true, "mention"],
    [{ request_sent: true }, false, undefined],
    [{ request_sent: true, persona_mentioned: true }, true, undefined],
    [{ state: "approved", request_sent: true, persona_mentioned: true }, true, "closing"],
    [{ state: "timeout", request_sent: false }, false, "skip_closing"],
    [{ state: "approved", request_sent: true, closing_sent: true, persona_mentioned: true }, true, undefined],
  ];
  for (const [overrides, persona, expected] of table) assert.equal(nextOutgoing(record(overrides), persona), expected, JSON.stringify(overrides));

  assert.doesNotMatch(CODE_ALPHABET, /[BGILOQSZ0-9]/, "no letter that reads like a digit or another letter");
  let i = 0;
  const sequence = [0, 0, 0, 0, 0, 1, 1, 1, 1, 1];
  assert.equal(
    pickCode(() => sequence[i++ % sequence.length]!, new Set(["AAAAA"])),
    "CCCCC",
    "a code taken by an open approval is drawn again",
  );
  assert.throws(() => pickCode(() => 0, new Set(["AAAAA"]), 3));

  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const text = requestText(record({ command: "curl -H 'Authorization: Bearer abcdefghijklmnop' x" }), NOW, zh);
  assert.match(text, /审批 ACDEF/);
  assert.match(text, /anon\.approve ACDEF/);
  assert.match(text, /请在 10分钟内回答/);
  assert.doesNotMatch(text, /abcdefghijklmnop/, "the server redacts the command again");
  assert.match(closingText(record({ state: "approved", via: "terminal" }), zh), /在终端批准.*无需再回答/);
  assert.match(closingText(record({ state: "vanished" }), zh), /会话已离线/);
  assert.equal(
    closingText(record({ state: "approved", via: "chat" }), en),
    "[Pi approval ACDEF ended] rm -rf: approved in the chat; the command was let through.",
  );
});

// ── Routes ──────────────────────────────────────────────────────────────────

const decide = (koishi: KoishiHarness, id: string, body: Record<string, unknown>, token = OPERATOR_TOKEN) =>
  call(koishi, "POST", `/operator/approvals/${id}/decision`, body, token);

test("routes: request with a code, first decision wins, duplicates, late and mismatched ones are answered, strangers refused", async (t) => {
  const { koishi, owner } = await server(t);
  const body = approvalRequestOf();
  const created = await call(koishi, "POST", "/approvals", body);
  assert.equal(created.status, 201);
  const { code, approval_id } = created.body.approval;
  assert.match(code, /^[A-Z]{5}$/);
  assert.equal((await call(koishi, "POST", "/approvals", body)).status, 200, "the same request again is answered with the stored one");
  assert.deepEqual((await call(koishi, "POST", "/approvals", { ...body, command: "rm -rf /" })).body, { error: "idempotency_key_reused" });
  const request = await waitUntil(() => owner[0], "the request reached the owner");
  assert.match(request, new RegExp(`审批 ${code}`));

  // Strangers: the agents' token, a wrong one.
  assert.equal((await decide(koishi, approval_id, { decision: "approved" }, koishi.token)).status, 401);
  assert.equal((await decide(koishi, approval_id, { decision: "approved" }, "nope")).status, 401);
  assert.deepEqual((await decide(koishi, approval_id, { decision: "approved", binding: { ...binding, args_digest: "b".repeat(64) } })).body, {
    error: "approval_mismatch",
  });
  assert.equal((await decide(koishi, "ZZZZZ", { decision: "approved" })).status, 404);

  const first = await decide(koishi, code.toLowerCase(), { decision: "approved", reason: "可以", binding });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.deepEqual([first.body.approval.state, first.body.approval.decided_by, first.body.approval.via], ["decided", "operator", "operator"]);
  const again = await decide(koishi, approval_id, { decision: "rejected" });
  assert.deepEqual([again.status, again.body], [409, { error: "already_decided", state: "decided" }]);

  // The agent says what happened; a decision after that is still answered.
  const resolved = await call(koishi, "POST", `/approvals/${approval_id}/resolution`, {
    session_id: "s-1",
    runtime_id: "r-1",
    outcome: "approved",
    via: "operator",
    reason: null,
  });
  assert.equal(resolved.body.approval.state, "approved");
  assert.deepEqual((await decide(koishi, code, { decision: "rejected" })).body, { error: "already_decided", state: "approved" });
  await waitUntil(() => owner.find((m) => m.includes(`${code} 已结束`) && m.includes("通过运维接口批准")), "one closing message");

  // A late answer to an approval that timed out.
  const expired = await call(
    koishi,
    "POST",
    "/approvals",
    approvalRequestOf({ tool_call_id: "call-late", expires_at: new Date(Date.now() - 1000).toISOString() }),
  );
  assert.deepEqual((await decide(koishi, expired.body.approval.code, { decision: "approved" })).body, { error: "approval_expired", state: "pending" });

  const open = await call(koishi, "GET", "/operator/approvals", undefined, OPERATOR_TOKEN);
  assert.deepEqual(
    open.body.approvals.map((a: { approval_id: string }) => a.approval_id),
    [expired.body.approval.approval_id],
  );
  const audit = await call(koishi, "GET", "/operator/audit?session_id=s-1&limit=200", undefined, OPERATOR_TOKEN);
  const refused = audit.body.entries.filter((e: { action: string }) => e.action === "approval.refused").map((e: { data: { error: string } }) => e.data.error);
  assert.deepEqual(refused.sort(), ["already_decided", "already_decided", "approval_expired", "approval_mismatch"]);
  const decided = audit.body.entries.find((e: { action: string }) => e.action === "approval.decided");
  assert.deepEqual([decided.actor, decided.data.by, decided.data.via, decided.data.reason], ["operator", "operator", "operator", "可以"]);
});

test("routes: two decisions racing for one approval: exactly one wins", async (t) => {
  const { koishi } = await server(t);
  const { approval_id } = (await call(koishi, "POST", "/approvals", approvalRequestOf())).body.approval;
  const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => decide(koishi, approval_id, { decision: i % 2 ? "approved" : "rejected" })));
  assert.deepEqual(answers.map((a) => a.status).sort(), [200, 409, 409, 409, 409, 409]);
});

test("the request is retried until the owner gets it; a session that goes away closes its approvals with one message", async (t) => {
  const { koishi, owner, failNextSends } = await server(t);
  failNextSends(2);
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  const { code } = (await call(koishi, "POST", "/approvals", approvalRequestOf())).body.approval;
  await waitUntil(() => owner[0], "the request got through after two failed sends", 15_000);
  assert.equal(owner.length, 1);
  assert.equal((await call(koishi, "POST", "/sessions/offline", { session_id: "s-1", runtime_id: "r-1" })).body.removed, true);
  const closing = await waitUntil(() => owner[1], "the closing message");
  assert.match(closing, new RegExp(`${code} 已结束.*会话已离线`));
  const [approval] = (await call(koishi, "GET", "/operator/approvals?state=all", undefined, OPERATOR_TOKEN)).body.approvals;
  assert.equal(approval.state, "vanished");
  assert.deepEqual((await decide(koishi, code, { decision: "approved" })).body, { error: "approval_expired", state: "vanished" });
});

test("an owner who cannot be reached is warned about once, not once per approval and retry; it is said again after a recovery", async (t) => {
  const { koishi, owner, failNextSends } = await server(t);
  const log = captureLog();
  t.after(() => log.stop());
  const unsent = () => log.warnings().filter((line) => line.includes("还没发出"));
  failNextSends(4);
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  for (const id of ["call-1", "call-2"]) assert.equal((await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: id }))).status, 201);
  // Two approvals, two passes that fail for both: four failed sends, then both get through.
  await waitUntil(() => owner[1], "both requests got through after the outage", 15_000);
  assert.equal(unsent().length, 1, unsent().join("\n"));
  assert.match(unsent()[0]!, /^审批 \w+ 的请求还没发出：机器人发送失败：platform down（send_failed）。会一直重试直到发出/);

  failNextSends(1);
  assert.equal((await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: "call-3" }))).status, 201);
  await waitUntil(() => owner[2], "the third request got through", 15_000);
  assert.equal(unsent().length, 2, "a new outage after a recovery is said again");
});

test("the persona can list approvals but has no way to decide one", async (t) => {
  const { koishi } = await server(t, { yesImBot: true });
  await call(koishi, "POST", "/approvals", approvalRequestOf());
  const service = koishi.app["yesimbot.tool"] as unknown as StandInToolService;
  const session = koishi.app.bots["mock:514"]!.session({
    type: "message",
    timestamp: Date.now(),
    channel: { id: `private:${OWNER}`, type: 1 },
    user: { id: OWNER },
  });
  const listed = await service.invoke("agent_approvals", {}, session);
  assert.equal(listed.status, "success");
  assert.equal((listed as { result: { approvals: unknown[] } }).result.approvals.length, 1);
  assert.equal(
    [...service.tools.keys()].some((name) => /approve|deny|decide/.test(name)),
    false,
  );
  const sneaky = await service.invoke("agent_approvals", { decision: "approved" }, session);
  assert.equal(sneaky.status, "error");
});

test("a restarted server sends the request it still owed, once", async (t) => {
  const owner: string[] = [];
  let platformUp = false;
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, botId: "mock:514", recipientId: OWNER },
    plugins: (use) => {
      use(MockBot, { selfId: "514" });
      // Loaded before notify-webhook, so the recorder is in place before its start-up pass.
      use((ctx: Context) =>
        ctx.on("ready", () => {
          ctx.bots["mock:514"]!.sendPrivateMessage = async (_userId, content) => {
            if (!platformUp) throw new Error("platform down");
            owner.push(String(content));
            return [`msg-${owner.length}`];
          };
        }),
      );
    },
  });
  t.after(() => koishi.stop());
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  const { approval_id, code } = (await call(koishi, "POST", "/approvals", approvalRequestOf())).body.approval;
  await waitUntil(async () => {
    const audit = await call(koishi, "GET", "/operator/audit?limit=200", undefined, OPERATOR_TOKEN);
    return audit.body.entries.some((e: { action: string }) => e.action === "approval.requested");
  }, "the request was stored");
  assert.deepEqual(owner, []);

  platformUp = true;
  await koishi.restart();
  await waitUntil(() => owner[0], "the restarted server sent the request");
  const [row] = await waitUntil(async () => {
    const rows = await koishi.app.database.get("anon_notify_approval", { approval_id });
    return rows[0]?.request_sent && rows[0].persona_mentioned ? rows : undefined;
  }, "everything owed is marked sent");
  assert.equal(row!.request_message_id, "msg-1");
  assert.equal(owner.length, 1);
  assert.match(owner[0]!, new RegExp(`审批 ${code}`));
});

test("retention removes closed approvals past the window whose messages went out; open, owing and recent ones stay", async (t) => {
  let store: ApprovalStore | undefined;
  const server = await startKoishi({
    withoutPlugin: true,
    plugins: (use) => void use({ name: "approval-store", inject: ["database"], apply: (ctx: Context) => void (store = new ApprovalStore(ctx)) }),
  });
  t.after(() => server.stop());
  const approvals = await waitUntil(() => store, "the approval store built once the database is there");
  const longAgo = new Date(NOW.getTime() - 31 * 24 * 60 * 60 * 1000);
  const sent = { request_sent: true, persona_mentioned: true, closing_sent: true };
  const rows: [string, Partial<ApprovalRecord>][] = [
    ["old-approved", { state: "approved", created_at: longAgo, ...sent }],
    ["old-vanished", { state: "vanished", created_at: longAgo, ...sent }],
    ["old-pending", { state: "pending", created_at: longAgo, ...sent }],
    ["old-decided", { state: "decided", created_at: longAgo, ...sent }],
    ["old-owing", { state: "rejected", created_at: longAgo, ...sent, closing_sent: false }],
    ["recent-approved", { state: "approved", created_at: NOW, ...sent }],
  ];
  for (const [id, overrides] of rows) {
    const { seq: _seq, ...row } = record({ approval_id: id, code: id.slice(0, 5), ...overrides });
    await approvals.create(row);
  }
  assert.equal(await approvals.prune(new Date(NOW.getTime() - 30 * 24 * 60 * 60 * 1000)), 2);
  const left = (await approvals.list({ limit: 10 })).map((row) => row.approval_id).sort();
  assert.deepEqual(left, ["old-decided", "old-owing", "old-pending", "recent-approved"]);
});
