/**
 * Standing grants: the pure decisions table by table, the service on a real database with an
 * injected clock (expiry on time, revocation for the next request), and the whole path on a real
 * Koishi app with plugin-mock's owner chat and the operator API.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Context } from "koishi";
import type { ApprovalRequest } from "../../protocol/approvals.ts";
import type { ApprovalRecord } from "../../server/approvals/decisions.ts";
import { coveringGrant, decideGrant, decideRevoke, serverGrantable, type GrantRecord } from "../../server/approvals/grant-decisions.ts";
import { GrantStore } from "../../server/approvals/grant-store.ts";
import { GrantService } from "../../server/approvals/grants.ts";
import { AuditLog } from "../../server/audit/store.ts";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call, operatorApi } from "../../harness/agent-api.ts";
import { startChat, type ChatHarness } from "../../harness/chat.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { consoleStage } from "../helpers/console.ts";

const NOW = new Date("2026-12-01T10:00:00.000Z");
const minutes = (n: number) => new Date(NOW.getTime() + n * 60_000);

function grant(overrides: Partial<GrantRecord> = {}): GrantRecord {
  return {
    seq: 1,
    grant_id: "GACDE",
    session_id: "s-1",
    rules: ["rm-rf", "sudo"],
    approval_id: "ap-1",
    created_by: "operator",
    via: "operator",
    created_at: NOW,
    expires_at: minutes(30),
    revoked_at: null,
    revoked_by: null,
    uses: 0,
    ...overrides,
  };
}

test("what the server may grant: only policy requests whose every rule the user made grantable, never a fail-closed finding or the model's own ask", () => {
  const table: [string, { grantable: boolean; source: "policy" | "ask_approval"; rules: string[] }, boolean][] = [
    ["grantable rm-rf", { grantable: true, source: "policy", rules: ["rm-rf"] }, true],
    ["the client said no", { grantable: false, source: "policy", rules: ["rm-rf"] }, false],
    ["an opaque finding, the client said yes", { grantable: true, source: "policy", rules: ["rm-rf", "opaque.eval"] }, false],
    ["ask_approval", { grantable: true, source: "ask_approval", rules: ["model.ask"] }, false],
    ["model.ask under policy", { grantable: true, source: "policy", rules: ["model.ask"] }, false],
    ["no rules", { grantable: true, source: "policy", rules: [] }, false],
  ];
  for (const [name, request, expected] of table) assert.equal(serverGrantable(request), expected, name);
  assert.deepEqual(
    decideGrant({ grantable: true, source: "policy", rules: ["rm-rf"] }, 600, 120, NOW),
    { kind: "grant", expiresAt: minutes(120) },
    "capped by the server's maximum",
  );
  assert.deepEqual(decideGrant({ grantable: true, source: "policy", rules: ["opaque.eval"] }, 30, 120, NOW), { kind: "refuse", error: "not_grantable" });
});

test("which live grant covers a request: same session, not revoked, not expired, every rule held", () => {
  const request = { session_id: "s-1", grantable: true, source: "policy" as const, rules: ["rm-rf"] };
  const table: [string, GrantRecord[], typeof request, Date, string | undefined][] = [
    ["covers", [grant()], request, NOW, "GACDE"],
    ["all of two rules", [grant()], { ...request, rules: ["sudo", "rm-rf"] }, NOW, "GACDE"],
    ["a rule it lacks", [grant()], { ...request, rules: ["rm-rf", "git-push-force"] }, NOW, undefined],
    ["another session", [grant()], { ...request, session_id: "s-2" }, NOW, undefined],
    ["a minute before its end", [grant()], request, minutes(29), "GACDE"],
    ["at its end", [grant()], request, minutes(30), undefined],
    ["revoked", [grant({ revoked_at: NOW, revoked_by: "operator" })], request, NOW, undefined],
    ["an opaque finding beside a granted rule", [grant({ rules: ["rm-rf", "opaque.eval"] })], { ...request, rules: ["rm-rf", "opaque.eval"] }, NOW, undefined],
    ["the longest running of two", [grant(), grant({ grant_id: "GAAAA", expires_at: minutes(60) })], request, NOW, "GAAAA"],
  ];
  for (const [name, grants, input, now, expected] of table) assert.equal(coveringGrant(grants, input, now)?.grant_id, expected, name);
  assert.equal(decideRevoke(undefined, "operator", NOW).kind, "refuse");
  assert.equal(decideRevoke(grant(), "operator", NOW).kind, "apply");
  assert.equal(decideRevoke(grant(), "operator", minutes(31)).kind, "unchanged", "an expired grant is left as it is");
});

test("the service on a real database: a grant expires on time and a revocation holds for the next request; each use is counted once", async (t) => {
  let service: GrantService | undefined;
  let store: GrantStore | undefined;
  let now = NOW;
  const server = await startKoishi({
    withoutPlugin: true,
    plugins: (use) =>
      void use({
        name: "grant-service",
        inject: ["database"],
        apply: (ctx: Context) => {
          store = new GrantStore(ctx);
          service = new GrantService({ store, audit: new AuditLog(ctx), maxMinutes: 120, now: () => now });
        },
      }),
  });
  t.after(() => server.stop());
  const grants = await waitUntil(() => service, "the grant service built once the database is there");
  const approval = { approval_id: "ap-1", code: "ACDEF", session_id: "s-1", rules: ["rm-rf"], grantable: true, source: "policy" } as ApprovalRecord;
  const operator = { actor: "operator" as const, name: "operator" };
  const made = await grants.create(approval, 30, operator, "chat");
  assert.match(made.grant_id, /^G[A-Z]{4}$/);
  assert.equal(made.expires_at, minutes(30).toISOString());

  const request = { ...approvalRequestOf({ session_id: "s-1", rules: ["rm-rf"] }), grantable: true } as ApprovalRequest;
  assert.deepEqual((await grants.use(request))?.use, 1);
  assert.deepEqual((await grants.use(request))?.use, 2);
  assert.equal(await grants.use({ ...request, rules: ["rm-rf", "opaque.eval"] }), undefined, "never for a fail-closed finding");
  now = minutes(29);
  assert.equal((await grants.use(request))?.use, 3);
  now = minutes(30);
  assert.equal(await grants.use(request), undefined, "expired on time");
  assert.deepEqual((await grants.list({ state: "live", limit: 10 })).length, 0);
  assert.deepEqual(
    (await grants.list({ state: "all", limit: 10 })).map((g) => g.uses),
    [3],
  );

  now = minutes(40);
  const second = await grants.create(approval, 30, operator, "console");
  assert.equal((await grants.use(request))?.grant.grant_id, second.grant_id);
  assert.equal((await grants.revoke(second.grant_id.toLowerCase(), operator)).revoked, true);
  assert.equal(await grants.use(request), undefined, "revoked: the next request is not granted");
  assert.equal((await grants.revoke(second.grant_id, operator)).revoked, false, "revoking again changes nothing");
  await assert.rejects(grants.revoke(second.grant_id, { actor: "persona", name: "persona" }), { code: "unauthorized" });

  // Retention: grants that ended before the cutoff go; the record of later ones stays.
  assert.equal(await store!.prune(minutes(35)), 1);
  assert.deepEqual(
    (await grants.list({ state: "all", limit: 10 })).map((g) => g.grant_id),
    [second.grant_id],
  );
});

// ── The whole path ──────────────────────────────────────────────────────────

const grantable = (overrides: Partial<ApprovalRequest> = {}) =>
  approvalRequestOf({ tool_call_id: `call-${Math.random()}`, rules: ["rm-rf"], grantable: true, ...overrides });

async function requested(chat: ChatHarness, overrides: Partial<ApprovalRequest> = {}) {
  const created = await call(chat, "POST", "/approvals", grantable(overrides));
  assert.equal(created.status, 201, JSON.stringify(created.body));
  return created.body as { approval: { approval_id: string; code: string; state: string; decision: string | null }; reach: string };
}

/** The control commands as the extension claims them, ACKed one by one: their payloads. */
async function claimedDecisions(chat: ChatHarness) {
  const agent = agentApi(chat);
  const payloads: { approval_id: string; grant?: { grant_id: string } }[] = [];
  for (;;) {
    const { body } = await agent.claim("s-1", "r-1", { lane: "control" });
    if (!body.command) return payloads;
    payloads.push(body.command.payload);
    await agent.ack(body.command.command_id, body.lease.token, "s-1", "r-1", "applied");
  }
}

test("approve for a while from the chat: the next request of the session with those rules is approved at once and counted; revoked, the next one asks again", async (t) => {
  const chat = await startChat({ config: { approvalBurst: 50, approvalsPerMinute: 1000, approvalsOpenPerSession: 10 } });
  t.after(() => chat.stop());
  await agentApi(chat).heartbeat({ project: "shop" });
  const owner = chat.owner();

  const first = await requested(chat);
  assert.equal(first.reach, "sent");
  const [reply] = await owner.receive(`anon.approve ${first.approval.code} 30m`);
  const grantId = /授权 (G[A-Z]{4})/.exec(reply ?? "")?.[1];
  assert.match(
    reply ?? "",
    new RegExp(
      `^已批准 ${first.approval.code}（rm -rf），并授权本会话 30分钟内只命中规则 rm-rf 的请求直接批准（授权 G[A-Z]{4}），决定已发给 Pi。撤销：anon\\.revoke G[A-Z]{4}$`,
    ),
  );
  assert.ok(grantId);

  const sent = chat.sent.length;
  const second = await requested(chat);
  assert.deepEqual([second.approval.state, second.approval.decision, second.reach], ["decided", "approved", "none"], "approved at once; nothing sent to ask");
  const payloads = await claimedDecisions(chat);
  assert.deepEqual(
    payloads.map((p) => p.grant?.grant_id ?? null),
    [null, grantId],
    "the control command carries the grant",
  );
  await call(chat, "POST", `/approvals/${second.approval.approval_id}/resolution`, {
    session_id: "s-1",
    runtime_id: "r-1",
    outcome: "approved",
    via: "chat",
    reason: null,
  });
  const closing = await waitUntil(
    () => chat.sent.slice(sent).find((m) => m.text.includes(`${second.approval.code} 已结束`)),
    "the closing message of the granted one",
  );
  assert.equal(closing.text, `【Pi 审批 ${second.approval.code} 已结束】rm -rf：已按授权 ${grantId} 批准（第 1 次使用），命令已放行。`);
  assert.equal(chat.sent.slice(sent).length, 1, "no request was sent for it, only its closing");

  // Never for what the server cannot see through, nor for a rule the grant does not hold.
  const opaque = await requested(chat, { rules: ["rm-rf", "opaque.eval"] });
  assert.equal(opaque.approval.state, "pending");
  assert.deepEqual(await owner.receive(`anon.approve ${opaque.approval.code} 30m`), [
    "这个审批不能授权（命中的规则无法看清要运行什么、是模型自己的请求，或该规则没有设为可授权）。可以只批准这一次。",
  ]);
  assert.equal((await requested(chat, { rules: ["sudo"] })).approval.state, "pending");
  assert.equal((await requested(chat, { source: "ask_approval", rules: ["model.ask"] })).approval.state, "pending");

  const [listing] = await owner.receive("anon.grants");
  assert.match(listing ?? "", new RegExp(`^有效的授权（1 个）：\\n${grantId} · #1 shop · 规则 rm-rf · 还剩 \\d+分钟 · 已用 1 次\\n撤销：anon\\.revoke`));
  assert.deepEqual(await owner.receive(`anon.revoke ${grantId}`), [`已撤销授权 ${grantId}（已用 1 次）。之后的请求会再问你。`]);
  assert.deepEqual(await owner.receive(`anon.revoke ${grantId}`), [`授权 ${grantId} 已经结束了（已用 1 次），无需撤销。`]);
  assert.deepEqual(await owner.receive("anon.grants"), ["现在没有有效的授权。"]);
  const after = await call(chat, "POST", "/approvals", grantable());
  assert.equal(after.body.approval.state, "pending", "revoked: the next request asks the owner");
  assert.match((await owner.receive(`anon.approve ${after.body.approval.code} 1d`))[0] ?? "", /看不懂授权时长“1d”。写成 30m、2h 这样，最长 240 分钟。/);

  const audit = (await operatorApi(chat).audit({ limit: "200" })).body.entries as {
    action: string;
    subject: string;
    data: { grant_id?: string; use?: number };
  }[];
  assert.deepEqual(
    audit
      .filter((e) => e.action.startsWith("grant.") || e.action === "approval.granted")
      .map((e) => e.action)
      .reverse(),
    ["grant.created", "approval.granted", "grant.revoked"],
  );
});

test("the operator API: grant_minutes only where grantable (else 409 not_grantable and nothing decided), grants listed and revoked", async (t) => {
  const chat = await startChat({ config: { grantMaxMinutes: 60 } });
  t.after(() => chat.stop());
  await agentApi(chat).heartbeat();
  const decide = (id: string, body: Record<string, unknown>) => call(chat, "POST", `/operator/approvals/${id}/decision`, body, OPERATOR_TOKEN);

  const opaque = await requested(chat, { rules: ["opaque.eval"] });
  assert.deepEqual((await decide(opaque.approval.approval_id, { decision: "approved", grant_minutes: 30 })).body, { error: "not_grantable" });
  const still = await call(chat, "GET", `/operator/approvals/${opaque.approval.approval_id}`, undefined, OPERATOR_TOKEN);
  assert.equal(still.body.approval.state, "pending", "a refused grant decided nothing");
  assert.equal((await decide(opaque.approval.approval_id, { decision: "rejected", grant_minutes: 30 })).status, 400);

  const plain = await requested(chat);
  const granted = await decide(plain.approval.approval_id, { decision: "approved", grant_minutes: 240 });
  assert.equal(granted.status, 200, JSON.stringify(granted.body));
  assert.equal(granted.body.approval.state, "decided");
  assert.ok(Date.parse(granted.body.grant.expires_at) <= Date.now() + 60 * 60_000, "capped by grantMaxMinutes");
  const listed = await call(chat, "GET", "/operator/grants", undefined, OPERATOR_TOKEN);
  assert.deepEqual(
    listed.body.grants.map((g: { grant_id: string }) => g.grant_id),
    [granted.body.grant.grant_id],
  );
  const revoked = await call(chat, "POST", `/operator/grants/${granted.body.grant.grant_id}/revoke`, {}, OPERATOR_TOKEN);
  assert.deepEqual([revoked.status, revoked.body.revoked, revoked.body.grant.revoked_by], [200, true, "operator"]);
  assert.deepEqual((await call(chat, "GET", "/operator/grants", undefined, OPERATOR_TOKEN)).body.grants, []);
  assert.equal((await call(chat, "GET", "/operator/grants?state=all", undefined, OPERATOR_TOKEN)).body.grants.length, 1);
  assert.equal((await call(chat, "POST", "/operator/grants/GZZZZ/revoke", {}, OPERATOR_TOKEN)).status, 404);
});

test("the console: a grantable approval is approved with a grant from the page, the grant is listed live and revoked from it", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true } });
  const page = await stage.open();
  await page.until((view) => view.grants, "the first data");
  assert.equal((await agentApi(stage.koishi).heartbeat({ project: "shop" })).status, 200);
  const opaque = (await call(stage.koishi, "POST", "/approvals", grantable({ rules: ["opaque.eval"] }))).body.approval;
  const plain = (await call(stage.koishi, "POST", "/approvals", grantable())).body.approval;
  const shown = await page.until((view) => (view.approvals.length === 2 ? view.approvals : undefined), "both approvals on the page");
  assert.deepEqual(
    shown.map((a) => [a.code, a.grantable]).sort(),
    [
      [opaque.code, false],
      [plain.code, true],
    ].sort(),
    "the page knows which one may be granted",
  );

  assert.deepEqual(await page.call("anon-notify/decide", { approval_id: opaque.approval_id, decision: "approved", grant_minutes: 30 }), {
    ok: false,
    error: "not_grantable",
  });
  const made = await page.call<{ approval: { state: string }; grant: { grant_id: string; via: string; created_by: string } }>("anon-notify/decide", {
    approval_id: plain.approval_id,
    decision: "approved",
    grant_minutes: 30,
  });
  assert.ok(made.ok, JSON.stringify(made));
  assert.deepEqual([made.value.approval.state, made.value.grant.via, made.value.grant.created_by], ["decided", "console", "console"]);
  const listed = await page.until((view) => view.grants[0], "the grant listed on the page");
  assert.deepEqual([listed.grant_id, listed.rules, listed.uses], [made.value.grant.grant_id, ["rm-rf"], 0]);

  const revoked = await page.call<{ revoked: boolean }>("anon-notify/revoke", { grant_id: listed.grant_id });
  assert.deepEqual(revoked.ok && revoked.value.revoked, true);
  await page.until((view) => (view.grants.length === 0 ? true : undefined), "the revoked grant gone from the page");
  assert.deepEqual(await page.call("anon-notify/revoke", { grant_id: "nope" }), {
    ok: false,
    error: "invalid_request",
    issues: [{ path: "grant_id", message: "must be a grant id: G and 4 letters" }],
  });
});
