import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { consoleTokenProblem, signInUrl, tokenMatches } from "../../server/console/sign-in.ts";
import {
  STATE_FLICKER_MS,
  actionGate,
  type GateInput,
  boardAudited,
  consoleApproval,
  boardGone,
  boardPruned,
  boardRecorded,
  boardView,
  originDecision,
  timelineItem,
  type Board,
} from "../../server/console/decisions.ts";

test("which WebSocket origins reach the page", () => {
  const cases: [string | undefined, string | undefined, string[], ReturnType<typeof originDecision>][] = [
    [undefined, "127.0.0.1:5140", [], { allowed: true }],
    ["http://127.0.0.1:5140", "127.0.0.1:5140", [], { allowed: true }],
    ["http://localhost:5140", "localhost:5140", [], { allowed: true }],
    ["http://[::1]:5140", "[::1]:5140", [], { allowed: true }],
    ["http://192.168.1.5:5140", "192.168.1.5:5140", [], { allowed: true }],
    ["https://evil.example", "127.0.0.1:5140", [], { allowed: false, reason: "cross_origin" }],
    ["http://127.0.0.1:8080", "127.0.0.1:5140", [], { allowed: false, reason: "cross_origin" }],
    ["null", "127.0.0.1:5140", [], { allowed: false, reason: "cross_origin" }],
    ["file://", "127.0.0.1:5140", [], { allowed: false, reason: "cross_origin" }],
    ["http://rebound.example:5140", "rebound.example:5140", [], { allowed: false, reason: "untrusted_host" }],
    ["https://bot.example.com", "127.0.0.1:5140", ["https://bot.example.com/"], { allowed: true }],
    ["https://bot.example.com", "bot.example.com", ["https://bot.example.com"], { allowed: true }],
    ["https://bot.example.com.evil.example", "bot.example.com", ["https://bot.example.com"], { allowed: false, reason: "cross_origin" }],
  ];
  for (const [origin, host, trusted, expected] of cases) assert.deepEqual(originDecision(origin, host, trusted), expected, `${origin} on ${host}`);
});

test("who may see and act: plugin-auth's logins, else the console token, else the explicit open switch; never half", () => {
  type Row = [Partial<GateInput>, ReturnType<typeof actionGate>, string];
  const base: GateInput = { required: 4, authInstalled: false, authority: null, signedIn: false, openToAll: false };
  const rows: Row[] = [
    [{}, { allowed: false, reason: "sign_in_required" }, "no auth, no token: nothing"],
    [{ signedIn: true }, { allowed: true, via: "token" }, "signed in with the token"],
    [{ openToAll: true }, { allowed: true, via: "open" }, "consoleActions opens it to the port"],
    [
      { authInstalled: true, openToAll: true, signedIn: true },
      { allowed: false, reason: "login_required" },
      "with auth, neither the switch nor the token opens it",
    ],
    [{ authInstalled: true, authority: 3 }, { allowed: false, reason: "authority_too_low" }, "too low"],
    [{ authInstalled: true, authority: 4 }, { allowed: true, via: "auth" }, "enough authority"],
  ];
  for (const [input, expected, why] of rows) assert.deepEqual(actionGate({ ...base, ...input }), expected, why);
});

test("the console token: compared whole, never a prefix or an empty token; a config token must be long and its own", () => {
  const token = "a".repeat(64);
  const rows: [string, string, boolean][] = [
    [token, token, true],
    [token.slice(0, 63), token, false],
    [`${token}b`, token, false],
    ["", "", false],
    ["A".repeat(64), token, false],
  ];
  for (const [presented, actual, expected] of rows) assert.equal(tokenMatches(presented, actual), expected, `${presented.length} chars`);
  assert.equal(consoleTokenProblem(token, ["x".repeat(64), ""]), null);
  assert.match(consoleTokenProblem("short", [])!, /too short/);
  assert.match(consoleTokenProblem(token, [token])!, /equals the agents' or the operator token/);
  assert.equal(signInUrl("http://127.0.0.1:5140/anon-notify", "a b"), "http://127.0.0.1:5140/anon-notify?token=a%20b");
});

const projection = (state: "idle" | "running", seenMs: number): SessionProjection => ({
  session_id: "s-1",
  project: "p",
  model: null,
  state,
  activity: null,
  supports_images: false,
  last_activity_at: new Date(seenMs).toISOString(),
  last_seen_at: new Date(seenMs).toISOString(),
  mixed_scripts: false,
});

test("the board keeps since-when per state, marks gone sessions, and follows watchdog flags", () => {
  let board: Board = new Map();
  board = boardRecorded(board, projection("idle", 1000), null, 1000);
  board = boardRecorded(board, projection("idle", 2000), null, 2000);
  assert.equal(board.get("s-1")!.stateSinceMs, 1000, "same state: the clock keeps running");
  board = boardRecorded(board, projection("running", 3000), "bash", 3000);
  assert.deepEqual([board.get("s-1")!.stateSinceMs, board.get("s-1")!.activity], [3000, "bash"]);
  board = boardAudited(board, { action: "watchdog.stalled", session_id: "s-1" });
  board = boardAudited(board, { action: "watchdog.stalled", session_id: "s-1" });
  assert.deepEqual(board.get("s-1")!.flags, ["stalled"]);
  board = boardAudited(board, { action: "watchdog.stalled_cleared", session_id: "s-1" });
  assert.deepEqual(board.get("s-1")!.flags, []);
  board = boardGone(board, "s-1", "expired", 4000);
  board = boardAudited(board, { action: "watchdog.vanished", session_id: "s-1" });
  const [gone] = boardView(board, new Map());
  assert.deepEqual([gone!.online, gone!.gone_reason, gone!.activity, gone!.flags], [false, "expired", null, ["vanished"]]);
  board = boardRecorded(board, projection("idle", 5000), null, 5000);
  assert.deepEqual([board.get("s-1")!.goneAtMs, board.get("s-1")!.flags], [null, []], "back: no longer gone or vanished");
  board = boardGone(board, "s-1", "offline", 6000);
  assert.equal(boardPruned(board, 6000 + 10, { keepGoneMs: 100, maxGone: 5 }).size, 1);
  assert.equal(boardPruned(board, 6000 + 101, { keepGoneMs: 100, maxGone: 5 }).size, 0);
  assert.equal(boardPruned(board, 6000, { keepGoneMs: 100, maxGone: 0 }).size, 0);
});

test("a running session's since survives the idle blink between two tool turns, not a real pause", () => {
  type Step = [state: "idle" | "running", atMs: number, since: number, why: string];
  const steps: Step[] = [
    ["running", 10_000, 10_000, "starts running"],
    ["idle", 20_000, 20_000, "idle between two tool turns"],
    ["running", 20_000 + STATE_FLICKER_MS, 10_000, "running again at once: the same stretch"],
    ["idle", 40_000, 40_000, "the run ends"],
    ["running", 40_000 + STATE_FLICKER_MS + 1, 40_000 + STATE_FLICKER_MS + 1, "a new run after a real pause starts its own clock"],
  ];
  let board: Board = new Map();
  for (const [state, atMs, since, why] of steps) {
    board = boardRecorded(board, projection(state, atMs), null, atMs);
    assert.equal(board.get("s-1")!.stateSinceMs, since, why);
  }
});

test("a timeline line says what it was about and how it ended", () => {
  const entry = { id: 1, at: "2026-01-01T00:00:00.000Z", actor: "server" as const, session_id: "s-1", subject: "e-1" };
  const accepted = timelineItem(
    { ...entry, action: "event.accepted", data: { event: { status: "failed", summary: "测试失败" } } },
    { state: "failed", attempts: 1, error: "no_persona" },
  );
  assert.deepEqual([accepted.text, accepted.receipt?.state, accepted.detail], ["failed · 测试失败", "failed", true]);
  const handed = timelineItem({ ...entry, action: "event.sent_direct", data: { outcome: { kind: "error", error: "bot_offline" }, text: "x".repeat(500) } });
  assert.deepEqual([handed.outcome, handed.text.length], ["error: bot_offline", 200]);
  assert.equal(timelineItem({ ...entry, action: "command.cancelled", data: {} }).outcome, "cancelled");
  const refused = timelineItem({
    ...entry,
    action: "console.send",
    data: { input: { session_id: "s-1", instruction: "hi" }, status: "refused", error: "read_only" },
  });
  assert.deepEqual([refused.text, refused.outcome], ["hi", "read_only"]);
});

test("timeline lines for held notices, approvals and mutes", () => {
  const entry = { id: 1, at: "2026-01-01T00:00:00.000Z", actor: "server" as const, session_id: "s-1", subject: "x" };
  const table: [string, Record<string, unknown>, string, string | null][] = [
    ["event.held", { status: "completed" }, "", "held"],
    ["approval.requested", { code: "ACDEF", tool: "bash", action: "rm -rf" }, "ACDEF · bash · rm -rf", "requested"],
    ["approval.decided", { code: "ACDEF", decision: "rejected", by: "console", via: "console" }, "ACDEF · rejected", "decided"],
    ["approval.refused", { decision: "approved", error: "already_decided", state: "decided" }, "approved · decided", "already_decided"],
    ["mute.set", { session_id: null, until: "2026-01-01T01:00:00.000Z" }, "2026-01-01T01:00:00.000Z", "set"],
    ["mute.ended", { session_id: null, ended: 2 }, "2", "ended"],
  ];
  for (const [action, data, text, outcome] of table) {
    const line = timelineItem({ ...entry, action, data });
    assert.deepEqual([line.text, line.outcome], [text, outcome], action);
  }
});

test("an approval on the page: what the agent wrote is redacted again", () => {
  const approval = consoleApproval({
    approval_id: "ap-1",
    code: "ACDEF",
    session_id: "s-1",
    tool: "bash",
    action: "curl",
    action_code: null,
    reason: "token=abcdef123456 needed",
    command: "curl",
    command_hidden_chars: 0,
    rules: ["rm-rf"],
    matched: null,
    grantable: false,
    preview: "curl -H 'Authorization: Bearer abcdefghijklmnop' https://user:pw@example.com",
    cwd: "/p",
    source: "policy",
    state: "pending",
    decision: null,
    decided_by: null,
    via: null,
    created_at: "2026-01-01T00:00:00.000Z",
    expires_at: "2026-01-01T00:10:00.000Z",
    resolved_at: null,
  });
  assert.doesNotMatch(approval.preview, /abcdefghijklmnop|:pw@/);
  assert.doesNotMatch(approval.reason, /abcdef123456/);
  assert.equal("via" in approval || "resolved_at" in approval, false);
});
