/**
 * Requests only from live sessions, bounded: the admission table, the flood and the never-online
 * session on a real Koishi app, how the owner is reached, and the sweep with an injected clock.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { Context } from "koishi";
import { OPERATOR_TOKEN, approvalRequestOf, call, heartbeatOf } from "../../harness/agent-api.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { decideAdmission } from "../../server/approvals/decisions.ts";
import { GrantStore } from "../../server/approvals/grant-store.ts";
import { GrantService } from "../../server/approvals/grants.ts";
import { ApprovalService } from "../../server/approvals/service.ts";
import { ApprovalStore } from "../../server/approvals/store.ts";
import { AuditLog } from "../../server/audit/store.ts";
import { NOW, server } from "./approval-fixtures.ts";

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

test("routes: a flood is bounded, a session that was never online is refused, a second request for the same call gets the first", async (t) => {
  const { koishi, owner } = await server(t);
  const never = await call(
    koishi,
    "POST",
    "/approvals",
    approvalRequestOf({ session_id: "ghost", runtime_id: "ghost-r", expires_at: "9999-12-31T00:00:00.000Z" }),
  );
  assert.deepEqual([never.status, never.body.error], [409, "session_offline"]);
  const otherRuntime = await call(koishi, "POST", "/approvals", approvalRequestOf({ runtime_id: "r-old" }));
  assert.deepEqual([otherRuntime.status, otherRuntime.body.error], [409, "session_offline"], "only the session's current runtime may ask");

  const first = await call(koishi, "POST", "/approvals", approvalRequestOf({ expires_at: "9999-12-31T00:00:00.000Z" }));
  assert.equal(first.status, 201);
  assert.ok(Date.parse(first.body.approval.expires_at) <= Date.now() + 15 * 60_000, "capped by the server's maximum");
  const again = await call(koishi, "POST", "/approvals", approvalRequestOf());
  assert.deepEqual([again.status, again.body.approval.approval_id], [200, first.body.approval.approval_id], "same call, same approval");

  const answers = await Promise.all(
    Array.from({ length: 40 }, (_, i) => call(koishi, "POST", "/approvals", approvalRequestOf({ tool_call_id: `flood-${i}` }))),
  );
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
            operatorDecisions: { optedIn: false, serverUid: 1000 },
            grants: new GrantService({ store: new GrantStore(ctx), audit: new AuditLog(ctx), maxMinutes: 120, now: () => now }),
            now: () => now,
          })),
      }),
  });
  t.after(() => server.stop());
  const approvals = await waitUntil(() => service, "the service built once the database is there");
  const ask = (runtime: string, call: string, expiresInMs: number) =>
    approvals.request(
      approvalRequestOf({
        session_id: `s-${runtime}`,
        runtime_id: runtime,
        tool_call_id: call,
        created_at: now.toISOString(),
        expires_at: new Date(now.getTime() + expiresInMs).toISOString(),
      }),
    );
  const soon = (await ask("r-1", "c-soon", 60_000)).approval;
  live.add("r-2");
  const gone = (await ask("r-2", "c-gone", 600_000)).approval;
  const forever = (await ask("r-1", "c-forever", 10 * 365 * 24 * 3_600_000)).approval;
  assert.equal(Date.parse(forever.expires_at), NOW.getTime() + 15 * 60_000, "capped at the server's maximum");
  live.delete("r-2");

  const state = async (id: string) => (await approvals.find(id))!.state;
  now = new Date(NOW.getTime() + 20_000);
  await approvals.sweep();
  assert.deepEqual(
    [await state(soon.approval_id), await state(gone.approval_id)],
    ["pending", "pending"],
    "within the grace after start liveness is not judged",
  );
  now = new Date(NOW.getTime() + 60_000 + 60_000);
  await approvals.sweep();
  assert.deepEqual([await state(soon.approval_id), await state(gone.approval_id), await state(forever.approval_id)], ["timeout", "vanished", "pending"]);
  now = new Date(NOW.getTime() + 16 * 60_000 + 1);
  await approvals.sweep();
  assert.equal(await state(forever.approval_id), "timeout", "closed at its capped time");
});
