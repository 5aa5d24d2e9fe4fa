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
import { posix } from "node:path";
import fc from "fast-check";
import { argvCovered, coveringGrant, decideGrant, decideRevoke, leavesProject, serverGrantable, type GrantRecord } from "../../server/approvals/grant-rules.ts";
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
    argv: [["rm", "-rf", "build"]],
    prefix: false,
    cwd: "/home/u/proj",
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

const CWD = "/home/u/proj";
const RM_BUILD = [["rm", "-rf", "build"]];

test("what the server may grant: a policy request with literal argv, never a fail-closed finding, the model's own ask or a call without argv; the client's word is not asked", () => {
  const base = { source: "policy" as const, rules: ["rm-rf"], argv: RM_BUILD, cwd: CWD };
  const table: [string, Parameters<typeof serverGrantable>[0], boolean][] = [
    ["grantable rm-rf", base, true],
    ["the client said no: the server decides", { ...base, grantable: false } as Parameters<typeof serverGrantable>[0], true],
    ["no argv (an expansion the client could not resolve)", { ...base, argv: undefined }, false],
    ["an empty argv", { ...base, argv: [] }, false],
    ["an empty simple command", { ...base, argv: [[]] }, false],
    ["an opaque finding", { ...base, rules: ["rm-rf", "opaque.eval"] }, false],
    ["ask_approval", { ...base, source: "ask_approval", rules: ["model.ask"] }, false],
    ["model.ask under policy", { ...base, rules: ["model.ask"] }, false],
    ["no rules", { ...base, rules: [] }, false],
    ["a protected path (asks in every mode)", { ...base, rules: ["rm-rf", "protected-path"] }, false],
  ];
  for (const [name, request, expected] of table) assert.equal(serverGrantable(request), expected, name);
  assert.deepEqual(
    decideGrant(base, 600, 120, NOW),
    { kind: "grant", expiresAt: minutes(120), argv: RM_BUILD, prefix: false },
    "capped by the server's maximum",
  );
  assert.deepEqual(decideGrant({ ...base, rules: ["opaque.eval"] }, 30, 120, NOW), { kind: "refuse", error: "not_grantable" });
  const npm = { ...base, argv: [["npm", "test", "--", "--grep", "x"]] };
  assert.deepEqual(decideGrant(npm, 30, 120, NOW, ["npm", "test"]), { kind: "grant", expiresAt: minutes(30), argv: [["npm", "test"]], prefix: true });
  for (const [name, approval, prefix] of [
    ["not its leading words", npm, ["npm", "run"]],
    ["longer than the command", npm, ["npm", "test", "--", "--grep", "x", "y"]],
    [
      "an approval of two simple commands",
      {
        ...base,
        argv: [
          ["npm", "test"],
          ["rm", "-rf", "build"],
        ],
      },
      ["npm"],
    ],
  ] as const)
    assert.deepEqual(
      decideGrant(approval, 30, 120, NOW, prefix),
      {
        kind: "refuse",
        error: "invalid_request",
        issues: [{ path: "grant_prefix", message: "must be the leading words of the approval's one simple command" }],
      },
      name,
    );
  assert.deepEqual(decideGrant({ ...npm, cwd: "/" }, 30, 120, NOW, ["npm"]), { kind: "refuse", error: "not_grantable" }, "no prefix grant in the root");
});

test("which live grant covers a request: same session and cwd, not revoked, not expired, the exact argv; none of the issue's widenings", () => {
  const request = { session_id: "s-1", source: "policy" as const, rules: ["rm-rf"], argv: RM_BUILD, cwd: CWD };
  const table: [string, GrantRecord[], typeof request, Date, string | undefined][] = [
    ["the same call", [grant()], request, NOW, "GACDE"],
    ["rm -rf ~", [grant()], { ...request, argv: [["rm", "-rf", "~"]] }, NOW, undefined],
    ["rm -rf build; rm -rf /", [grant()], { ...request, argv: [...RM_BUILD, ["rm", "-rf", "/"]] }, NOW, undefined],
    ["rm -rf build twice", [grant()], { ...request, argv: [...RM_BUILD, ...RM_BUILD] }, NOW, undefined],
    ["rm -rf / from cwd /", [grant()], { ...request, argv: [["rm", "-rf", "/"]], cwd: "/" }, NOW, undefined],
    ["the same argv from another cwd", [grant()], { ...request, cwd: "/home/u" }, NOW, undefined],
    ["a request without argv", [grant()], { ...request, argv: undefined as never }, NOW, undefined],
    ["a grant made before binding (no argv)", [grant({ argv: null })], request, NOW, undefined],
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

test("a prefix grant covers the commands starting with it whose further words stay inside the project", () => {
  const prefix = grant({ argv: [["npm", "test"]], prefix: true, rules: ["npm"] });
  const covered = (argv: string[][]) => argvCovered(prefix, argv);
  const table: [string, string[][], boolean][] = [
    ["the prefix itself", [["npm", "test"]], true],
    ["with project arguments", [["npm", "test", "--", "--grep", "login", "src/a.test.ts", "./b/../c"]], true],
    [
      "twice",
      [
        ["npm", "test"],
        ["npm", "test", "x"],
      ],
      true,
    ],
    [
      "another program beside it",
      [
        ["npm", "test"],
        ["rm", "-rf", "build"],
      ],
      false,
    ],
    ["a longer word, not the prefix", [["npm", "testx"]], false],
    ["home", [["npm", "test", "~"]], false],
    ["home path", [["npm", "test", "~/x"]], false],
    ["absolute elsewhere", [["npm", "test", "/etc/passwd"]], false],
    ["absolute inside", [["npm", "test", `${CWD}/src`]], true],
    ["a sibling sharing the name's start", [["npm", "test", "/home/u/project2"]], false],
    ["a .. escape", [["npm", "test", "../other"]], false],
    ["a deep .. escape", [["npm", "test", "a/../../.."]], false],
    ["after =", [["npm", "test", "--out=/etc/x"]], false],
    ["after :", [["npm", "test", "x:~/y"]], false],
    ["glued to a short option", [["npm", "test", "-C/etc"]], false],
    ["dd's of=", [["npm", "test", "of=/dev/sda"]], false],
    ["an expansion (never sent, fail closed)", [["npm", "test", "$HOME"]], false],
  ];
  for (const [name, argv, expected] of table) assert.equal(covered(argv), expected, name);
});

test("leavesProject agrees with path resolution for plain path words (generated)", () => {
  const piece = fc.constantFrom("a", "b", "..", ".", "", "proj", "u", "home");
  const word = fc.tuple(fc.boolean(), fc.array(piece, { minLength: 1, maxLength: 6 })).map(([absolute, parts]) => (absolute ? "/" : "") + parts.join("/"));
  fc.assert(
    fc.property(word, (w) => {
      const rel = posix.relative(CWD, posix.resolve(CWD, w));
      assert.equal(leavesProject(w, CWD), rel.startsWith("..") || posix.isAbsolute(rel), w);
    }),
    { seed: 34, numRuns: 2000 },
  );
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
  const approval = {
    approval_id: "ap-1",
    code: "ACDEF",
    session_id: "s-1",
    rules: ["rm-rf"],
    argv: RM_BUILD,
    cwd: CWD,
    grantable: true,
    source: "policy",
  } as ApprovalRecord;
  const operator = { actor: "operator" as const, name: "operator" };
  const made = await grants.create(approval, 30, operator, "chat");
  assert.match(made.grant_id, /^G[A-Z]{4}$/);
  assert.equal(made.expires_at, minutes(30).toISOString());

  const request = approvalRequestOf({ session_id: "s-1", rules: ["rm-rf"], argv: RM_BUILD });
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
  approvalRequestOf({ tool_call_id: `call-${Math.random()}`, rules: ["rm-rf"], argv: RM_BUILD, grantable: true, ...overrides });

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
  const chat = await startChat({ config: { approvalBurst: 50, approvalsPerMinute: 1000, approvalsOpenPerSession: 20 } });
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
      `^已批准 ${first.approval.code}（rm -rf），并授权本会话 30分钟内在 proj 目录下：只有完全相同的命令 rm -rf build 直接批准（授权 G[A-Z]{4}），决定已发给 Pi。撤销：anon\\.revoke G[A-Z]{4}$`,
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

  // Never for another call: the issue's widenings each ask the owner.
  for (const [argv, cwd] of [
    [[["rm", "-rf", "~"]], "/home/u/proj"],
    [[...RM_BUILD, ["rm", "-rf", "/"]], "/home/u/proj"],
    [[["rm", "-rf", "/"]], "/"],
    [RM_BUILD, "/home/u"],
  ] as const) {
    const widened = await requested(chat, { argv: argv.map((c) => [...c]), cwd });
    assert.equal(widened.approval.state, "pending", JSON.stringify({ argv, cwd }));
    await owner.receive(`anon.deny ${widened.approval.code}`);
  }
  assert.equal((await requested(chat, { argv: undefined })).approval.state, "pending", "a request without argv is never covered");

  // Never for what the server cannot see through, nor for a rule the grant does not hold.
  const opaque = await requested(chat, { rules: ["rm-rf", "opaque.eval"] });
  assert.equal(opaque.approval.state, "pending");
  assert.deepEqual(await owner.receive(`anon.approve ${opaque.approval.code} 30m`), [
    "这个审批不能授权（命中的规则无法看清要运行什么、是模型自己的请求，或命令里有不是字面量的部分，无法绑定到确切的调用）。可以只批准这一次。",
  ]);
  assert.equal((await requested(chat, { rules: ["sudo"] })).approval.state, "pending");
  assert.equal((await requested(chat, { source: "ask_approval", rules: ["model.ask"] })).approval.state, "pending");

  const [listing] = await owner.receive("anon.grants");
  assert.match(
    listing ?? "",
    new RegExp(`^有效的授权（1 个）：\\n${grantId} · #1 shop · 只有完全相同的命令 rm -rf build 直接批准 · 还剩 \\d+分钟 · 已用 1 次\\n撤销：anon\\.revoke`),
  );
  assert.deepEqual(await owner.receive(`anon.revoke ${grantId}`), [`已撤销授权 ${grantId}（用过 1 次）。之后的请求会再问你。`]);
  assert.deepEqual(await owner.receive(`anon.revoke ${grantId}`), [`授权 ${grantId} 已经结束了（用过 1 次），无需撤销。`]);
  assert.deepEqual(await owner.receive("anon.grants"), ["现在没有有效的授权。"]);
  const after = await call(chat, "POST", "/approvals", grantable());
  assert.equal(after.body.approval.state, "pending", "revoked: the next request asks the owner");
  assert.match((await owner.receive(`anon.approve ${after.body.approval.code} 1d`))[0] ?? "", /看不懂授权时长“1d”。写成 30m、2h 这样，最长 240 分钟。/);

  // A prefix the owner picks covers the commands starting with it, inside the project, and says so.
  const npm = await requested(chat, { argv: [["npm", "test", "--", "--grep", "a"]], rules: ["strict.unknown"] });
  const [prefixed] = await owner.receive(`anon.approve ${npm.approval.code} 30m npm test`);
  assert.match(prefixed ?? "", /并授权本会话 30分钟内在 proj 目录下：以 npm test 开头、其余参数不指向项目以外的命令直接批准（授权 G[A-Z]{4}）/);
  assert.equal((await requested(chat, { argv: [["npm", "test", "src/x.test.ts"]], rules: ["strict.unknown"] })).approval.state, "decided");
  assert.equal((await requested(chat, { argv: [["npm", "test", "../../etc"]], rules: ["strict.unknown"] })).approval.state, "pending");
  const [badPrefix] = await owner.receive(`anon.approve ${after.body.approval.code} 30m rm -rf build now`);
  assert.match(badPrefix ?? "", /grant_prefix/, "a prefix the call does not start with is refused, nothing decided");

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
    ["grant.created", "approval.granted", "grant.revoked", "grant.created", "approval.granted"],
  );
});

test("the operator API: grant_minutes only where grantable (else 409 not_grantable and nothing decided), grants listed and revoked", async (t) => {
  const chat = await startChat({ config: { grantMaxMinutes: 60, approvalOperatorDecisions: true } });
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
