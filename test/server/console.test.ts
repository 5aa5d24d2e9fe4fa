/**
 * The owner's console page, through the console's real WebSocket protocol (the messages its page
 * sends and receives), against a real Koishi app with @koishijs/plugin-console and real Pi sessions.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createRequire } from "node:module";
import type { Context, Plugin } from "koishi";
import { Approval, type ApprovalRequest } from "../../protocol/approvals.ts";
import { AuditEntry, AuditKind } from "../../protocol/audit.ts";
import { CommandSummary } from "../../protocol/queue.ts";
import { MuteEnded, MuteSet, OperatorCommandCreated } from "../../protocol/operator.ts";
import { approvalRequestOf, call, heartbeatOf } from "../../harness/agent-api.ts";
import { consoleStage } from "../helpers/console.ts";
import { ai, latch, waitForAbortStep } from "../../harness/pi.ts";
import { gatedTool } from "../../harness/session-commands.ts";
import { imageOf } from "./images.ts";
import type { ConsoleSession, TimelineItem } from "../../server/console/decisions.ts";
import type { RunView } from "../../server/console/run-rules.ts";
import { waitUntil } from "../../harness/wait.ts";

const require = createRequire(import.meta.url);

function sessionIn(sessions: ConsoleSession[], sessionId: string) {
  return sessions.find((session) => session.session_id === sessionId);
}

test("the page's data follows a real Pi session as it comes online, runs a tool, finishes and goes offline", { timeout: 60_000 }, async (t) => {
  const stage = await consoleStage(t, { config: { logPersona: true } });
  const page = await stage.openSignedIn();
  await page.until((view) => view.sessions.length === 0 && view.actions, "the first data, with no session");
  assert.deepEqual(page.view!.actions, { allowed: true, via: "token" }, "no plugin-auth: signed in with the console token");

  const slow = gatedTool("slow");
  const { pi, sessionId } = await stage.openPi([slow.tool]);
  const idle = await page.until((view) => sessionIn(view.sessions, sessionId), "the session online");
  assert.deepEqual([idle.online, idle.state, idle.project, idle.model, idle.activity], [true, "idle", "work", "faux/faux-1", null]);

  pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("整理完毕。")]);
  const run = pi.prompt("整理一下日志");
  await slow.started;
  const running = await page
    .until(
      (view) => {
        const session = sessionIn(view.sessions, sessionId);
        return session?.state === "running" && session.activity === "slow" ? session : undefined;
        // Running is sent at once; the tool it runs comes with the next periodic heartbeat (10 s).
      },
      "the session running the slow tool",
      15_000,
    )
    .catch((error: Error) => {
      throw new Error(`${error.message}; last seen ${JSON.stringify(sessionIn(page.view!.sessions, sessionId))}`);
    });
  assert.ok(Date.parse(running.state_since) >= Date.parse(idle.state_since), "the running state has its own since");

  slow.release();
  await run;
  await page.until((view) => sessionIn(view.sessions, sessionId)?.state === "idle", "the session idle again");
  const accepted = await page.until(
    (view) => view.timeline.find((item) => item.action === "event.accepted" && item.session_id === sessionId && item.receipt?.state === "context_injected"),
    "the run's notice on the timeline, handed to the persona",
  );
  assert.match(accepted.text, /^completed · /);
  const handed = await page.until(
    (view) => view.timeline.find((item) => item.action === "event.handed_to_persona" && item.subject === accepted.subject),
    "the hand-over line",
  );
  assert.equal(handed.outcome, "injected");

  // The exact text handed over, on demand.
  const full = await page.call<AuditEntry>("anon-notify/entry", { id: handed.id });
  assert.ok(full.ok);
  const entry = AuditEntry.parse(full.value);
  assert.equal(typeof entry.data.text, "string");
  assert.ok((entry.data.text as string).includes(accepted.subject!), "the block names the event");

  // Filters: by session and kind, and by time.
  const onlyEvents = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { session_id: sessionId, kind: "event" });
  assert.ok(onlyEvents.ok);
  assert.ok(onlyEvents.value.entries.length >= 2);
  assert.ok(onlyEvents.value.entries.every((item) => item.session_id === sessionId && item.action.startsWith("event.")));
  const future = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { since: new Date(Date.now() + 60_000).toISOString() });
  assert.ok(future.ok);
  assert.deepEqual(future.value.entries, []);
  assert.deepEqual(await page.call("anon-notify/timeline", { kind: "nonsense" }), {
    ok: false,
    error: "invalid_request",
    issues: [{ path: "kind", message: `Invalid option: expected one of ${AuditKind.options.map((kind) => `"${kind}"`).join("|")}` }],
  });

  await pi.prompt("/anon-notify");
  const gone = await page.until((view) => {
    const session = sessionIn(view.sessions, sessionId);
    return session && !session.online ? session : undefined;
  }, "the session listed as gone");
  assert.equal(gone.gone_reason, "offline");
});

test("with actions turned on, the page sends an instruction (with an image) that a real session answers, cancels a queued one, and sees each refusal's reason", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true, logPersona: true } });
  const page = await stage.open();
  const slow = gatedTool("slow");
  const { pi, sessionId } = await stage.openPi([slow.tool]);
  await page.until((view) => sessionIn(view.sessions, sessionId), "the session online");
  assert.deepEqual(page.view!.actions, { allowed: true, via: "open" });

  pi.script([ai.fauxAssistantMessage("收到图片，已经看过了。")]);
  const sent = await page.call("anon-notify/send", {
    session_id: sessionId,
    instruction: "看看这张图",
    images: [imageOf("image/png", 64, 1)],
    request_key: "k-1",
  });
  assert.ok(sent.ok, JSON.stringify(sent));
  const created = OperatorCommandCreated.parse(sent.value);
  assert.equal(created.command.origin, "operator");
  const answered = await page.until(
    (view) =>
      sessionIn(view.sessions, sessionId)?.commands.find((command) => command.command_id === created.command.command_id && command.state === "accepted"),
    "the instruction accepted by the session",
  );
  assert.equal(answered.image_count, 1);
  await pi.session.waitForIdle();
  const seen = pi.modelCalls.at(-1)!.messages.at(-1)!;
  assert.ok(JSON.stringify(seen.content).includes("看看这张图"), "the model saw the instruction");
  assert.ok(JSON.stringify(seen.content).includes('"image"'), "and its image");

  // The same submit again (a reconnect, a double click) queues nothing new.
  const again = await page.call("anon-notify/send", {
    session_id: sessionId,
    instruction: "看看这张图",
    images: [imageOf("image/png", 64, 1)],
    request_key: "k-1",
  });
  assert.ok(again.ok);
  assert.deepEqual(OperatorCommandCreated.parse(again.value), {
    command: { ...created.command, state: "accepted", cancellable: false, updated_at: OperatorCommandCreated.parse(again.value).command.updated_at },
    duplicate: true,
  });

  // While a tool runs, the session holds at most one instruction (the one its poll took); the next
  // stays queued, can be cancelled, and never arrives.
  pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("slow", {})], { stopReason: "toolUse" }),
    ai.fauxAssistantMessage("好了。"),
    ai.fauxAssistantMessage("做完了。"),
  ]);
  const run = pi.prompt("跑个长任务");
  await slow.started;
  const first = await page.call("anon-notify/send", { session_id: sessionId, instruction: "先做这个" });
  assert.ok(first.ok);
  const queued = await page.call("anon-notify/send", { session_id: sessionId, instruction: "这条会撤回" });
  assert.ok(queued.ok);
  const queuedId = OperatorCommandCreated.parse(queued.value).command.command_id;
  const cancelled = await page.call("anon-notify/cancel", { session_id: sessionId, command_id: queuedId });
  assert.ok(cancelled.ok, JSON.stringify(cancelled));
  assert.equal(CommandSummary.parse(cancelled.value).state, "cancelled");
  await page.until(
    (view) => sessionIn(view.sessions, sessionId)?.commands.find((command) => command.command_id === queuedId && command.state === "cancelled"),
    "the cancel on the page",
  );
  slow.release();
  await run;
  await pi.session.waitForIdle();
  assert.ok(!JSON.stringify(pi.modelCalls.map((call) => call.messages)).includes("这条会撤回"), "the cancelled instruction never reached the model");

  // Each refusal comes back as the server's reason.
  assert.deepEqual(await page.call("anon-notify/cancel", { session_id: sessionId, command_id: created.command.command_id }), {
    ok: false,
    error: "already_accepted",
  });
  assert.deepEqual(await page.call("anon-notify/cancel", { session_id: sessionId, command_id: "c-nope" }), { ok: false, error: "not_found" });
  assert.deepEqual(await page.call("anon-notify/send", { session_id: "s-elsewhere", instruction: "在吗" }), { ok: false, error: "session_offline" });
  const empty = await page.call("anon-notify/send", { session_id: sessionId, instruction: "" });
  assert.equal(empty.ok, false);
  assert.equal(!empty.ok && empty.error, "invalid_request");
  const badImage = await page.call("anon-notify/send", {
    session_id: sessionId,
    instruction: "图",
    images: [{ mime_type: "image/png", data: Buffer.from("not a png").toString("base64") }],
  });
  assert.equal(!badImage.ok && badImage.error, "invalid_image");

  // Every action, done or refused, is on the audit trail as the console's.
  const trail = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { kind: "console", limit: 50 });
  assert.ok(trail.ok);
  assert.deepEqual(trail.value.entries.map((item) => [item.action, item.outcome]).reverse(), [
    ["console.send", "ok"],
    ["console.send", "ok"],
    ["console.send", "ok"],
    ["console.send", "ok"],
    ["console.cancel", "ok"],
    ["console.cancel", "already_accepted"],
    ["console.cancel", "not_found"],
    ["console.send", "session_offline"],
    ["console.send", "invalid_request"],
    ["console.send", "invalid_image"],
  ]);
  assert.ok(trail.value.entries.every((item) => item.actor === "console"));
  // The instructions themselves are the page's too, the first as the later ones (once labelled the operator's).
  const queuedRows = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { kind: "command", limit: 50 });
  assert.ok(queuedRows.ok);
  const pendingActors = queuedRows.value.entries.filter((item) => item.action === "command.pending").map((item) => item.actor);
  assert.deepEqual(pendingActors, ["console", "console", "console"]);
});

test("the page stops a real session's run through the operator service and shows what the session did; refusals come back as reasons", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true } });
  const page = await stage.open();
  const { pi, sessionId } = await stage.openPi();
  await page.until((view) => sessionIn(view.sessions, sessionId)?.state === "idle", "the session online and idle");

  // Idle: nothing to stop, and the session says so.
  const idle = await page.call("anon-notify/stop", { session_id: sessionId });
  assert.ok(idle.ok, JSON.stringify(idle));
  assert.deepEqual([CommandSummary.parse(idle.value).kind, CommandSummary.parse(idle.value).outcome], ["stop", "already_idle"]);

  // Streaming: the stop aborts the run like Esc, and the answer carries the session's ACK.
  const modelStarted = latch();
  pi.script([waitForAbortStep(modelStarted.signal)]);
  const run = pi.prompt("写一篇很长的文章");
  await modelStarted.promise;
  await page.until((view) => sessionIn(view.sessions, sessionId)?.state === "running", "the session running on the page");
  const stopped = await page.call("anon-notify/stop", { session_id: sessionId });
  assert.ok(stopped.ok, JSON.stringify(stopped));
  const summary = CommandSummary.parse(stopped.value);
  assert.deepEqual([summary.state, summary.outcome], ["accepted", "stopped"]);
  await run;
  await page.until(
    (view) => sessionIn(view.sessions, sessionId)?.commands.find((command) => command.command_id === summary.command_id && command.outcome === "stopped"),
    "the stop and its outcome on the card",
  );

  assert.deepEqual(await page.call("anon-notify/stop", { session_id: "s-elsewhere" }), { ok: false, error: "session_offline" });
  const trail = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { kind: "console", limit: 10 });
  assert.ok(trail.ok);
  assert.deepEqual(trail.value.entries.map((item) => [item.action, item.subject === null ? null : "command", item.outcome]).reverse(), [
    ["console.stop", "command", "ok"],
    ["console.stop", "command", "ok"],
    ["console.stop", null, "session_offline"],
  ]);
});

test("a page of another site gets neither the data nor any action through the console's WebSocket", { timeout: 30_000 }, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true, consoleOrigins: ["https://bot.example.com"] } });
  const own = await stage.open(`http://127.0.0.1:${stage.port}`);
  const evil = await stage.open("https://evil.example");
  const rebound = await stage.open(`http://rebound.example:${stage.port}`);
  const proxied = await stage.open("https://bot.example.com");
  await own.until((view) => view.actions, "the page's own data");
  await proxied.until((view) => view.actions, "a listed origin's data");

  for (const [name, socket] of [
    ["another site", evil],
    ["a rebound DNS name", rebound],
  ] as const) {
    // The console answers every client's first refresh; ours is refused to this one.
    const pinged = await socket.raw("ping");
    assert.equal(pinged.value, "pong", `${name}: the console itself still talks`);
    assert.equal(socket.store.anonNotify ?? null, null, `${name}: no sessions or timeline`);
    assert.deepEqual(await socket.raw("anon-notify/send", { session_id: "s-1", instruction: "rm -rf ~" }), { error: "unauthorized" }, `${name}: send refused`);
    assert.deepEqual(await socket.raw("anon-notify/timeline", {}), { error: "unauthorized" }, `${name}: reading refused`);
  }
  const audited = await own.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { kind: "console" });
  assert.ok(audited.ok);
  assert.deepEqual(audited.value.entries, [], "a refused page never reached the operator service");
});

test("with plugin-auth installed, only a login with enough authority sees the page and acts", { timeout: 30_000 }, async (t) => {
  const auth = require("@koishijs/plugin-auth").default as Plugin<Context>;
  const stage = await consoleStage(t, {
    config: { consoleActions: false },
    plugins: (use) => void use(auth, { admin: { enabled: true, username: "admin", password: "pw" } }),
  });
  const anonymous = await stage.open();
  assert.deepEqual(await anonymous.raw("anon-notify/send", { session_id: "s-1", instruction: "x" }), { error: "unauthorized" });
  assert.equal(anonymous.store.anonNotify ?? null, null);

  const admin = await stage.open();
  const login = await admin.raw("login/password", "admin", "pw");
  assert.equal(login.error, undefined);
  await admin.until((view) => view.actions, "the data after login");
  assert.deepEqual(admin.view!.actions, { allowed: true, via: "auth" });
  assert.deepEqual(
    await admin.call("anon-notify/send", { session_id: "s-1", instruction: "x" }),
    { ok: false, error: "session_offline" },
    "past the gate, the operator service decides",
  );
  // A decision names the login that made it.
  assert.equal((await call(stage.koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  const { approval_id } = Approval.parse((await call(stage.koishi, "POST", "/approvals", approvalRequest())).body.approval);
  const decided = await admin.call<{ approval: Approval }>("anon-notify/decide", { approval_id, decision: "approved" });
  assert.deepEqual(decided.ok && [decided.value.approval.decided_by, decided.value.approval.via], ["console:admin", "console"]);
});

test("the page mutes a real session: its next notice is held (queued) and shown so, unmute hands it over; all-sessions mutes take the chat's default and limit", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true, logPersona: true } });
  const page = await stage.open();
  const { pi, sessionId } = await stage.openPi();
  await page.until((view) => sessionIn(view.sessions, sessionId), "the session online");
  assert.deepEqual([page.view!.mutes, page.view!.held], [[], 0]);

  const muted = await page.call("anon-notify/mute", { session_id: sessionId, minutes: 30 });
  assert.ok(muted.ok, JSON.stringify(muted));
  const { mute } = MuteSet.parse(muted.value);
  assert.equal(mute.session_id, sessionId);
  await page.until((view) => view.mutes.find((entry) => entry.session_id === sessionId && entry.until === mute.until), "the mute and its end on the page");

  pi.script([ai.fauxAssistantMessage("测试都跑完了。")]);
  await pi.prompt("跑一下测试");
  const held = await page.until(
    (view) => view.timeline.find((item) => item.action === "event.held" && item.session_id === sessionId),
    "the run's notice held by the mute",
  );
  assert.equal(held.outcome, "held");
  const queued = await page.until(
    (view) => view.held === 1 && view.timeline.find((item) => item.action === "event.accepted" && item.subject === held.subject),
    "the held count and the notice's line",
  );
  assert.deepEqual([queued.receipt?.state, queued.receipt?.error], ["queued", null], "held, not failed");
  assert.equal(
    page.view!.timeline.some((item) => item.action === "event.handed_to_persona" && item.subject === held.subject),
    false,
    "not handed over while muted",
  );

  const unmuted = await page.call("anon-notify/unmute", { session_id: sessionId });
  assert.ok(unmuted.ok);
  assert.deepEqual(MuteEnded.parse(unmuted.value), { ended: 1 });
  const released = await page.until((view) => {
    const line = view.timeline.find((item) => item.action === "event.accepted" && item.subject === held.subject);
    return view.mutes.length === 0 && view.held === 0 && line?.receipt?.state === "context_injected" ? line : undefined;
  }, "the mute gone and the held notice handed to the persona as the digest");
  assert.equal(released.receipt?.error, null);
  assert.deepEqual(await page.call("anon-notify/unmute", { session_id: sessionId }), { ok: true, value: { ended: 0 } }, "nothing left to end");

  // All sessions, no duration: the chat's default of 60 minutes; beyond 7 days is refused.
  const all = await page.call("anon-notify/mute", {});
  assert.ok(all.ok);
  const allMute = MuteSet.parse(all.value).mute;
  assert.equal(allMute.session_id, null);
  const setRow = await page.until(
    (view) => view.timeline.find((item) => item.action === "mute.set" && item.session_id === null),
    "the all-sessions mute on the timeline",
  );
  assert.equal(
    Date.parse(allMute.until) - Date.parse(setRow.at) <= 60 * 60_000 && Date.parse(allMute.until) - Date.parse(setRow.at) > 59 * 60_000,
    true,
    "about an hour from when it was set",
  );
  const tooLong = await page.call("anon-notify/mute", { minutes: 7 * 24 * 60 + 1 });
  assert.equal(!tooLong.ok && tooLong.error, "invalid_request");
  assert.deepEqual(await page.call("anon-notify/unmute", {}), { ok: true, value: { ended: 1 } });
  await page.until((view) => view.mutes.length === 0, "every mute ended on the page");

  const trail = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { limit: 100 });
  assert.ok(trail.ok);
  const rows = trail.value.entries.filter(
    (item) => item.action.startsWith("console.mute") || item.action.startsWith("console.unmute") || item.action.startsWith("mute."),
  );
  assert.deepEqual(rows.map((item) => [item.actor, item.action, item.outcome]).reverse(), [
    ["console", "mute.set", "set"],
    ["console", "console.mute", "ok"],
    ["console", "mute.ended", "ended"],
    ["console", "console.unmute", "ok"],
    ["console", "console.unmute", "ok"],
    ["console", "mute.set", "set"],
    ["console", "console.mute", "ok"],
    ["console", "console.mute", "invalid_request"],
    ["console", "mute.ended", "ended"],
    ["console", "console.unmute", "ok"],
  ]);
});

/** With a secret in the preview, which the page must show redacted. */
const approvalRequest = (overrides: Partial<ApprovalRequest> = {}) =>
  approvalRequestOf({ cwd: "/home/u/shop", command: "rm -rf build && curl -H 'Authorization: Bearer abcdefghijklmnop' x", ...overrides });

test("open approvals reach the page live; the page's decision reaches the approval and the session; later, late and unknown answers say why", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, { config: { consoleActions: true } });
  const page = await stage.open();
  await page.until((view) => view.approvals, "the first data");
  assert.equal((await call(stage.koishi, "POST", "/sessions/heartbeat", heartbeatOf({ project: "shop" }))).status, 200);

  const created = await call(stage.koishi, "POST", "/approvals", approvalRequest());
  assert.equal(created.status, 201);
  const request = Approval.parse(created.body.approval);
  const shown = await page.until((view) => view.approvals.find((item) => item.approval_id === request.approval_id), "the approval on the page");
  assert.deepEqual(
    [shown.code, shown.session_id, shown.tool, shown.reason, shown.state, shown.expires_at],
    [request.code, "s-1", "bash", "规则 rm-rf", "pending", request.expires_at],
  );
  assert.match(shown.preview, /^rm -rf build/);
  assert.doesNotMatch(shown.preview, /abcdefghijklmnop/, "the preview is redacted again");

  const decided = await page.call<{ approval: Approval }>("anon-notify/decide", { approval_id: request.approval_id, decision: "rejected", reason: "先备份" });
  assert.ok(decided.ok, JSON.stringify(decided));
  assert.deepEqual(
    [decided.value.approval.state, decided.value.approval.decision, decided.value.approval.decided_by, decided.value.approval.via],
    ["decided", "rejected", "console", "console"],
  );
  // The decision is on its way to the session as a control command, and the page says so.
  await page.until(
    (view) => view.approvals.find((item) => item.approval_id === request.approval_id && item.state === "decided"),
    "the approval decided on the page",
  );
  const command = await page.until(
    (view) => sessionIn(view.sessions, "s-1")?.commands.find((item) => item.kind === "approval_decision"),
    "the decision queued for the session",
  );
  assert.equal(command.state, "pending");

  assert.deepEqual(await page.call("anon-notify/decide", { approval_id: request.approval_id, decision: "approved" }), {
    ok: false,
    error: "already_decided",
    state: "decided",
  });
  assert.deepEqual(await page.call("anon-notify/decide", { approval_id: "ap-nope", decision: "approved" }), { ok: false, error: "not_found" });
  const other = Approval.parse((await call(stage.koishi, "POST", "/approvals", approvalRequest({ tool_call_id: "call-2" }))).body.approval);
  assert.deepEqual(
    await page.call("anon-notify/decide", {
      approval_id: other.approval_id,
      decision: "approved",
      binding: { tool_call_id: "call-2", args_digest: "b".repeat(64), cwd: "/home/u/shop" },
    }),
    { ok: false, error: "approval_mismatch" },
  );
  const late = Approval.parse(
    (await call(stage.koishi, "POST", "/approvals", approvalRequest({ tool_call_id: "call-3", expires_at: new Date(Date.now() - 1000).toISOString() }))).body
      .approval,
  );
  assert.deepEqual(await page.call("anon-notify/decide", { approval_id: late.approval_id, decision: "approved" }), {
    ok: false,
    error: "approval_expired",
    state: "pending",
  });

  // The agent's word closes it: it leaves the page's list.
  const resolved = await call(stage.koishi, "POST", `/approvals/${request.approval_id}/resolution`, {
    session_id: "s-1",
    runtime_id: "r-1",
    outcome: "rejected",
    via: "console",
    reason: "先备份",
  });
  assert.equal(resolved.body.approval.state, "rejected");
  await page.until(
    (view) => !view.approvals.some((item) => item.approval_id === request.approval_id) && view.approvals.length === 2,
    "the closed approval gone, the two open ones still listed",
  );

  const trail = await page.call<{ entries: TimelineItem[] }>("anon-notify/timeline", { limit: 100 });
  assert.ok(trail.ok);
  const consoleRows = trail.value.entries.filter((item) => item.action === "console.decide").reverse();
  assert.deepEqual(
    consoleRows.map((item) => [item.outcome, item.subject]),
    [
      ["ok", request.approval_id],
      ["already_decided", request.approval_id],
      ["not_found", "ap-nope"],
      ["approval_mismatch", other.approval_id],
      ["approval_expired", late.approval_id],
    ],
  );
  assert.equal(consoleRows[0]!.session_id, "s-1");
  const decidedRow = await page.call<AuditEntry>("anon-notify/entry", { id: trail.value.entries.find((item) => item.action === "approval.decided")!.id });
  assert.ok(decidedRow.ok);
  assert.deepEqual(
    [decidedRow.value.actor, decidedRow.value.data.by, decidedRow.value.data.via, decidedRow.value.data.reason],
    ["console", "console", "console", "先备份"],
  );
});

test("anon-notify/session answers a real session's runs: a finished one with its start (started notices off, as by default), duration, reply and context use", {
  timeout: 60_000,
}, async (t) => {
  const stage = await consoleStage(t, {
    userConfig: {
      notify: { started: false, progress: false, completed: true, failed: true, toolError: false },
      delivery: { timeoutMs: 12_000, maxAttempts: 3, backoffMs: 1_000, minIntervalMs: 0, outboxMaxAgeMs: 7 * 24 * 3_600_000 },
    },
  });
  const page = await stage.openSignedIn();
  const { pi, sessionId } = await stage.openPi();
  pi.script([ai.fauxAssistantMessage("## 完成\n\n改好了 `README.md`。")]);
  const before = new Date().toISOString();
  await pi.prompt("更新 README");
  const runs = await waitUntil(async () => {
    const answer = await page.call<{ session_id: string; runs: RunView[] }>("anon-notify/session", { session_id: sessionId });
    return answer.ok && answer.value.runs[0]?.outcome === "done" ? answer.value.runs : undefined;
  }, "the finished run in the session's runs");
  const [run] = runs;
  assert.equal(runs.length, 1);
  assert.equal(run!.task, "更新 README");
  assert.ok(run!.started_at && run!.started_at >= before && run!.ended_at && run!.started_at <= run!.ended_at, JSON.stringify(run));
  assert.equal(run!.duration_ms, Date.parse(run!.ended_at!) - Date.parse(run!.started_at), JSON.stringify(run));
  assert.match(run!.reply!, /## 完成\n\n改好了 `README\.md`。/);
  assert.equal(typeof run!.context?.context_window, "number");
  assert.deepEqual(await page.call("anon-notify/session", { session_id: "s-nobody" }), { ok: true, value: { session_id: "s-nobody", runs: [] } });
  const invalid = await page.call("anon-notify/session", {});
  assert.equal(!invalid.ok && invalid.error, "invalid_request");
});
