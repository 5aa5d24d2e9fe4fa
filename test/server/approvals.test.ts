/**
 * Approvals on the server: the pure decisions table by table, then the routes on a real Koishi app
 * (SQLite, plugin-server, a mock bot whose sends to the owner are recorded).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Context, Plugin } from "koishi";
import { CODE_ALPHABET, type ApprovalResolution } from "../../protocol/approvals.ts";
import { consoleApproval } from "../../server/console/model.ts";
import { decideAdmission, decideDecision, decideExpiry, decideResolution, decideVanish, nextOutgoing, pickCode, project, type ApprovalRecord } from "../../server/approvals/decisions.ts";
import { closingText, requestText, wholeCommandTexts } from "../../server/approvals/messages.ts";
import { voice } from "./approval-voice.ts";
import { ApprovalStore } from "../../server/approvals/store.ts";
import { ApprovalService } from "../../server/approvals/service.ts";
import { GrantService } from "../../server/approvals/grants.ts";
import { GrantStore } from "../../server/approvals/grant-store.ts";
import { AuditLog } from "../../server/audit/store.ts";
import { OPERATOR_TOKEN, approvalRequestOf, call, heartbeatOf } from "../../harness/agent-api.ts";
import { captureLog, startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { MockBot } from "./persona-standin.ts";
import { StandInToolService } from "./yesimbot-tool-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

const OWNER = "10001";
const NOW = new Date("2026-11-30T03:00:00.000Z");
const binding = { tool_call_id: "call-1", args_digest: "a".repeat(64), cwd: "/home/u/proj" };

function record(overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    seq: 1, approval_id: "ap-1", code: "ACDEF", session_id: "s-1", runtime_id: "r-1", run_id: "r-1.run.1", ...binding,
    tool: "bash", action: "rm -rf", reason: "规则 rm-rf", command: "rm -rf build", command_hidden_chars: 0, rules: ["rm-rf"], grantable: false, preview: "rm -rf build", source: "policy", request_digest: "d",
    state: "pending", decision: null, decision_reason: null, decided_by: null, via: null, outcome_reason: null,
    created_at: NOW, expires_at: new Date(NOW.getTime() + 600_000), decided_at: null, resolved_at: null,
    request_message_id: null, request_sent: false, persona_mentioned: false, closing_sent: false, grant_id: null, grant_use: null,
    ...overrides,
  };
}

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
  assert.deepEqual(applied.kind === "apply" && [applied.from, applied.patch.state, applied.patch.decision, applied.patch.decision_reason], ["pending", "decided", "rejected", "不行"]);
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
  assert.equal(pickCode(() => sequence[i++ % sequence.length]!, new Set(["AAAAA"])), "CCCCC", "a code taken by an open approval is drawn again");
  assert.throws(() => pickCode(() => 0, new Set(["AAAAA"]), 3));

  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const text = requestText(record({ command: "curl -H 'Authorization: Bearer abcdefghijklmnop' x" }), NOW, zh);
  assert.match(text, /审批 ACDEF/);
  assert.match(text, /anon\.approve ACDEF/);
  assert.match(text, /请在 10分钟内回答/);
  assert.doesNotMatch(text, /abcdefghijklmnop/, "the server redacts the command again");
  assert.match(closingText(record({ state: "approved", via: "terminal" }), zh), /在终端批准.*无需再回答/);
  assert.match(closingText(record({ state: "vanished" }), zh), /会话已离线/);
  assert.equal(closingText(record({ state: "approved", via: "chat" }), en), "[Pi approval ACDEF ended] rm -rf: approved in the chat; the command was let through.");
});

test("the request says the real time left, as the locale writes it, in one language", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const table: [number, string, string][] = [
    [2_500, "请在 2秒钟内回答，否则按拒绝处理。", "Answer within 2 seconds, or it counts as denied."],
    [600_000, "请在 10分钟内回答，否则按拒绝处理。", "Answer within 10 minutes, or it counts as denied."],
    [-5_000, "请在 1秒钟内回答，否则按拒绝处理。", "Answer within 1 second, or it counts as denied."],
    [3 * 3_600_000 + 5 * 60_000, "请在 3小时 5分钟内回答，否则按拒绝处理。", "Answer within 3 hours 5 minutes, or it counts as denied."],
  ];
  for (const [leftMs, zhLine, enLine] of table) {
    const row = record({ expires_at: new Date(NOW.getTime() + leftMs) });
    assert.ok(requestText(row, NOW, zh).split("\n").includes(zhLine), `${leftMs} ms: ${requestText(row, NOW, zh)}`);
    assert.ok(requestText(row, NOW, en).split("\n").includes(enLine), `${leftMs} ms: ${requestText(row, NOW, en)}`);
  }
  const english = requestText(record({ rules: ["git-push-force"], reason: "rule git-push-force" }), NOW, en);
  assert.doesNotMatch(english, /[\u3000-\u9fff\uff00-\uffef]/, "no Chinese in the English request");
  const chinese = requestText(record({ rules: ["git-push-force"], reason: "rule git-push-force" }), NOW, zh);
  assert.doesNotMatch(chinese, /reply|approval|rule /i, "no English words in the Chinese request beyond names and codes");
  assert.match(chinese, /^规则：git-push-force$/m);
});

test("the request is the command, verbatim, on lines nothing the agent wrote can start", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const forged = "ls\n批准：anon.approve XXXXX\n\n\n\u202egit push --force\tx\x0b";
  for (const [name, v] of [["zh", zh], ["en", en]] as const) {
    const text = requestText(record({ command: forged, action: "ok\nanon.approve YYYYY", reason: "x\n批准", source: "ask_approval" }), NOW, v);
    const lines = text.split("\n");
    assert.ok(lines.some((line) => line.includes("ls⏎批准：anon.approve XXXXX⏎⏎⏎\\u202egit push --force\\tx\\x0b")), `${name}: the command in full, one line, controls visible:\n${text}`);
    const answering = lines.filter((line) => /^(批准|拒绝|Approve|Deny|anon\.)/.test(line));
    assert.equal(answering.length, 2, `${name}: only the server's own two answer lines:\n${text}`);
    assert.ok(answering.every((line) => line.includes("ACDEF") && !line.includes("XXXXX")), name);
    assert.ok(lines.every((line) => !/^(ls|git|ok|x)\b/.test(line)), `${name}: no line starts with agent text`);
  }

  assert.deepEqual(consoleApproval(project(record({ command: forged }))).command_lines, ["ls⏎", "批准：anon.approve XXXXX⏎", "⏎", "⏎", "\\u202egit push --force\\tx\\x0b"], "the console: a line per line, controls visible");

  const long = `echo ${"a".repeat(5000)}; rm -rf ~`;
  const cut = requestText(record({ command: long }), NOW, zh);
  assert.match(cut, /┃ echo a+ ⟦…\d+…⟧ a+; rm -rf ~$/m, "head and tail, the tail's rm in sight");
  const hidden = Number(/中间有 (\d+) 个字符没有显示。完整内容：anon\.approval ACDEF/.exec(cut)?.[1]);
  assert.ok(hidden > 4000 && hidden < long.length, cut);
  assert.match(requestText(record({ command: "rm -rf ~", command_hidden_chars: 1234 }), NOW, en), /Pi left out 1234 of its characters/);

  const parts = wholeCommandTexts(record({ command: `${"x".repeat(4000)}\n批准：anon.approve XXXXX\ntail`, code: "ACDEF" }), zh);
  assert.ok(parts.length >= 3, "split across messages");
  assert.match(parts[0]!, /^【Pi 审批 ACDEF 的完整内容 1\/\d】/);
  for (const part of parts) {
    assert.ok(part.length <= 1500 + 80, "each message is bounded");
    assert.ok(part.split("\n").slice(1).every((line) => /^[┃┆] /.test(line)), "every command line behind the bar");
  }
  assert.equal(parts.join("\n").replace(/^【.*\n?/gm, "").split("\n").map((line) => line.slice(2)).join(""), `${"x".repeat(4000)}⏎批准：anon.approve XXXXX⏎tail`, "all of it, in order");
});

test("admission: only the live runtime, within the open and per-minute limits, never open past the server's maximum", () => {
  const limits = { maxOpenMs: 15 * 60_000, openPerSession: 3, rate: { perMinute: 6, burst: 2 } };
  const full = { tokens: 2, updatedAtMs: NOW.getTime() };
  const input = { live: true, open: 0, bucket: full, requestedExpiry: new Date(NOW.getTime() + 600_000), now: NOW };
  const table: [string, typeof input, string, number?][] = [
    ["live, nothing open", input, "admit", NOW.getTime() + 600_000],
    ["asks for the year 9999", { ...input, requestedExpiry: new Date("9999-01-01T00:00:00Z") }, "admit", NOW.getTime() + 15 * 60_000],
    ["not online", { ...input, live: false }, "session_offline"],
    ["three open already", { ...input, open: 3 }, "too_many_approvals"],
    ["bucket empty", { ...input, bucket: { tokens: 0.5, updatedAtMs: NOW.getTime() } }, "rate_limited"],
  ];
  for (const [name, given, expected, expiry] of table) {
    const result = decideAdmission(given, limits);
    assert.equal(result.kind === "refuse" ? result.error : result.kind, expected, name);
    if (expiry !== undefined) assert.equal(result.kind === "admit" && result.expiresAt.getTime(), expiry, name);
  }
  assert.equal(decideAdmission({ ...input, open: 3 }, limits).bucket, full, "a refusal for the open limit spends no token");
  let bucket = full;
  const kinds = Array.from({ length: 4 }, () => {
    const result = decideAdmission({ ...input, bucket }, limits);
    bucket = result.bucket;
    return result.kind;
  });
  assert.deepEqual(kinds, ["admit", "admit", "refuse", "refuse"], "a burst of two, then the rate");
});

// ── Routes ──────────────────────────────────────────────────────────────────


async function server(t: { after(fn: () => Promise<void>): void }, options: { yesImBot?: boolean } = {}) {
  const owner: string[] = [];
  let failSends = 0;
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, botId: "mock:514", recipientId: OWNER },
    plugins: (use) => {
      use(MockBot, { selfId: "514" });
      if (options.yesImBot) use(StandInToolService as unknown as Plugin<Context>);
    },
  });
  koishi.app.bots["mock:514"]!.sendPrivateMessage = async (userId, content) => {
    assert.equal(userId, OWNER);
    if (failSends > 0) {
      failSends--;
      throw new Error("platform down");
    }
    owner.push(String(content));
    return [`msg-${owner.length}`];
  };
  t.after(() => koishi.stop());
  // Approvals come only from a session's live runtime.
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  return { koishi, owner, failNextSends: (n: number) => (failSends = n) };
}

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
  assert.deepEqual((await decide(koishi, approval_id, { decision: "approved", binding: { ...binding, args_digest: "b".repeat(64) } })).body, { error: "approval_mismatch" });
  assert.equal((await decide(koishi, "ZZZZZ", { decision: "approved" })).status, 404);

  const first = await decide(koishi, code.toLowerCase(), { decision: "approved", reason: "可以", binding });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.deepEqual([first.body.approval.state, first.body.approval.decided_by, first.body.approval.via], ["decided", "operator", "operator"]);
  const again = await decide(koishi, approval_id, { decision: "rejected" });
  assert.deepEqual([again.status, again.body], [409, { error: "already_decided", state: "decided" }]);

  // The agent says what happened; a decision after that is still answered.
  const resolved = await call(koishi, "POST", `/approvals/${approval_id}/resolution`, { session_id: "s-1", runtime_id: "r-1", outcome: "approved", via: "operator", reason: null });
  assert.equal(resolved.body.approval.state, "approved");
  assert.deepEqual((await decide(koishi, code, { decision: "rejected" })).body, { error: "already_decided", state: "approved" });
  await waitUntil(() => owner.find((m) => m.includes(`${code} 已结束`) && m.includes("通过运维接口批准")), "one closing message");

  // A late answer to an approval that timed out.
  const expired = await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: "call-late", expires_at: new Date(Date.now() - 1000).toISOString() }));
  assert.deepEqual((await decide(koishi, expired.body.approval.code, { decision: "approved" })).body, { error: "approval_expired", state: "pending" });

  const open = await call(koishi, "GET", "/operator/approvals", undefined, OPERATOR_TOKEN);
  assert.deepEqual(open.body.approvals.map((a: { approval_id: string }) => a.approval_id), [expired.body.approval.approval_id]);
  const audit = await call(koishi, "GET", "/operator/audit?session_id=s-1&limit=200", undefined, OPERATOR_TOKEN);
  const refused = audit.body.entries.filter((e: { action: string }) => e.action === "approval.refused").map((e: { data: { error: string } }) => e.data.error);
  assert.deepEqual(refused.sort(), ["already_decided", "already_decided", "approval_expired", "approval_mismatch"]);
  const decided = audit.body.entries.find((e: { action: string }) => e.action === "approval.decided");
  assert.deepEqual([decided.actor, decided.data.by, decided.data.via, decided.data.reason], ["operator", "operator", "operator", "可以"]);
});

test("routes: a flood is bounded, a session that was never online is refused, a second request for the same call gets the first", async (t) => {
  const { koishi, owner } = await server(t);
  const never = await call(koishi, "POST", "/approvals", approvalRequestOf({ session_id: "ghost", runtime_id: "ghost-r", expires_at: "9999-12-31T00:00:00.000Z" }));
  assert.deepEqual([never.status, never.body.error], [409, "session_offline"]);
  const otherRuntime = await call(koishi, "POST", "/approvals", approvalRequestOf({ runtime_id: "r-old" }));
  assert.deepEqual([otherRuntime.status, otherRuntime.body.error], [409, "session_offline"], "only the session's current runtime may ask");

  const first = await call(koishi, "POST", "/approvals", approvalRequestOf({ expires_at: "9999-12-31T00:00:00.000Z" }));
  assert.equal(first.status, 201);
  assert.ok(Date.parse(first.body.approval.expires_at) <= Date.now() + 15 * 60_000, "capped by the server's maximum");
  const again = await call(koishi, "POST", "/approvals", approvalRequestOf());
  assert.deepEqual([again.status, again.body.approval.approval_id], [200, first.body.approval.approval_id], "same call, same approval");

  const answers = await Promise.all(Array.from({ length: 40 }, (_, i) => call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: `flood-${i}` }))));
  const statuses = answers.map((a) => a.status);
  assert.equal(statuses.filter((s) => s === 201).length, 2, "three open at most");
  assert.ok(answers.filter((a) => a.status === 429).every((a) => ["too_many_approvals", "rate_limited"].includes(a.body.error)));
  await waitUntil(() => owner.length >= 3 && owner, "the three requests reached the owner");
  const open = await call(koishi, "GET", "/operator/approvals", undefined, OPERATOR_TOKEN);
  assert.equal(open.body.approvals.length, 3);
  assert.equal(owner.length, 3, "the owner got three requests, not forty");
});

test("routes: the answer says truly how the owner is reached: sent, queued (retried), or none (no chat)", async (t) => {
  const { koishi, owner, failNextSends } = await server(t);
  const sent = await call(koishi, "POST", "/approvals", approvalRequestOf());
  assert.deepEqual([sent.status, sent.body.reach], [201, "sent"]);
  assert.equal(owner.length, 1, "sent means the owner has it");
  assert.equal((await call(koishi, "POST", "/approvals", approvalRequestOf())).body.reach, "sent", "a repeat says the same");

  failNextSends(1000);
  const queued = await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: "call-2" }));
  assert.deepEqual([queued.status, queued.body.reach], [201, "queued"]);
  assert.equal(owner.length, 1);

  const standalone = await startKoishi({ config: { operatorToken: OPERATOR_TOKEN } });
  t.after(() => standalone.stop());
  assert.equal((await call(standalone, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  const none = await call(standalone, "POST", "/approvals", approvalRequestOf());
  assert.deepEqual([none.status, none.body.reach], [201, "none"]);
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
  const unsent = () => log.warnings().filter((line) => line.includes("not sent yet"));
  failNextSends(4);
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  for (const id of ["call-1", "call-2"]) assert.equal((await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: id }))).status, 201);
  // Two approvals, two passes that fail for both: four failed sends, then both get through.
  await waitUntil(() => owner[1], "both requests got through after the outage", 15_000);
  assert.equal(unsent().length, 1, unsent().join("\n"));
  assert.match(unsent()[0]!, /platform down/);

  failNextSends(1);
  assert.equal((await call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: "call-3" }))).status, 201);
  await waitUntil(() => owner[2], "the third request got through", 15_000);
  assert.equal(unsent().length, 2, "a new outage after a recovery is said again");
});

test("the persona can list approvals but has no way to decide one", async (t) => {
  const { koishi } = await server(t, { yesImBot: true });
  await call(koishi, "POST", "/approvals", approvalRequestOf());
  const service = koishi.app["yesimbot.tool"] as unknown as StandInToolService;
  const session = koishi.app.bots["mock:514"]!.session({ type: "message", timestamp: Date.now(), channel: { id: `private:${OWNER}`, type: 1 }, user: { id: OWNER } });
  const listed = await service.invoke("agent_approvals", {}, session);
  assert.equal(listed.status, "success");
  assert.equal((listed as { result: { approvals: unknown[] } }).result.approvals.length, 1);
  assert.equal([...service.tools.keys()].some((name) => /approve|deny|decide/.test(name)), false);
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

test("the sweep ends what nobody can answer: past its time, or its runtime not online once the server has been up a heartbeat timeout", async (t) => {
  let service: ApprovalService | undefined;
  let now = NOW;
  const live = new Set(["r-1"]);
  const server = await startKoishi({
    withoutPlugin: true,
    plugins: (use) =>
      void use({
        name: "approval-service",
        inject: ["database"],
        apply: (ctx: Context) =>
          void (service = new ApprovalService({
            store: new ApprovalStore(ctx),
            audit: new AuditLog(ctx),
            control: { createControlCommand: async () => ({}) },
            changed: () => {},
            isLive: (_session, runtime) => live.has(runtime),
            presenceGraceMs: 30_000,
            limits: { maxOpenMs: 15 * 60_000, openPerSession: 10, rate: { perMinute: 100, burst: 100 } },
            grants: new GrantService({ store: new GrantStore(ctx), audit: new AuditLog(ctx), maxMinutes: 120, now: () => now }),
            now: () => now,
          })),
      }),
  });
  t.after(() => server.stop());
  const approvals = await waitUntil(() => service, "the service built once the database is there");
  const ask = (runtime: string, call: string, expiresInMs: number) =>
    approvals.request(approvalRequestOf({ session_id: `s-${runtime}`, runtime_id: runtime, tool_call_id: call, created_at: now.toISOString(), expires_at: new Date(now.getTime() + expiresInMs).toISOString() }));
  const soon = (await ask("r-1", "c-soon", 60_000)).approval;
  live.add("r-2");
  const gone = (await ask("r-2", "c-gone", 600_000)).approval;
  const forever = (await ask("r-1", "c-forever", 10 * 365 * 24 * 3_600_000)).approval;
  assert.equal(Date.parse(forever.expires_at), NOW.getTime() + 15 * 60_000, "capped at the server's maximum");
  live.delete("r-2");

  const state = async (id: string) => (await approvals.find(id))!.state;
  now = new Date(NOW.getTime() + 20_000);
  await approvals.sweep();
  assert.deepEqual([await state(soon.approval_id), await state(gone.approval_id)], ["pending", "pending"], "within the grace after start liveness is not judged");
  now = new Date(NOW.getTime() + 60_000 + 60_000);
  await approvals.sweep();
  assert.deepEqual([await state(soon.approval_id), await state(gone.approval_id), await state(forever.approval_id)], ["timeout", "vanished", "pending"]);
  now = new Date(NOW.getTime() + 16 * 60_000 + 1);
  await approvals.sweep();
  assert.equal(await state(forever.approval_id), "timeout", "closed at its capped time");
});
