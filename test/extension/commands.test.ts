import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import {
  interruptedNotice,
  planClaim,
  planDelivery,
  repollDelay,
  unansweredAfterInterrupt,
  wantsTurnEnd,
  type ClaimFacts,
  type RunFact,
} from "../../extension/command-channel/instruction-rules.ts";
import { CustomMessageComponent, initTheme } from "@earendil-works/pi-coding-agent";
import { commandMessage, commandMessageRenderer, instructionText } from "../../extension/command-channel/instruction-message.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { JOURNAL_COMPACT_AT_RECORDS, JOURNAL_KEEP_RECORDS, openCommandJournal } from "../../extension/command-channel/journal.ts";
import { SendRequest } from "../../protocol/state-bus.ts";
import { allowedOutcome, controlStep, stoppedRun } from "../../extension/command-channel/control-rules.ts";
import { ControlDispatcher } from "../../extension/command-channel/control-channel.ts";

const ready: ClaimFacts = { running: true, idle: true, serverHeardIdle: true, atBoundary: false, claimInFlight: false, outstanding: false, backingOff: false };

test("claims: long poll when idle and the server heard it, a quick claim only at a busy turn boundary, never two at once", () => {
  const rows: { facts: Partial<ClaimFacts>; plan: ReturnType<typeof planClaim> }[] = [
    { facts: {}, plan: { claim: true, kind: "idle", waitMs: 25_000 } },
    { facts: { idle: false }, plan: { claim: false } },
    { facts: { serverHeardIdle: false }, plan: { claim: false } },
    { facts: { idle: false, atBoundary: true }, plan: { claim: true, kind: "boundary", waitMs: 0 } },
    { facts: { idle: false, atBoundary: true, serverHeardIdle: false }, plan: { claim: true, kind: "boundary", waitMs: 0 } },
    { facts: { claimInFlight: true }, plan: { claim: false } },
    { facts: { idle: false, atBoundary: true, claimInFlight: true }, plan: { claim: false } },
    { facts: { outstanding: true }, plan: { claim: false } },
    { facts: { idle: false, atBoundary: true, outstanding: true }, plan: { claim: false } },
    { facts: { backingOff: true }, plan: { claim: false } },
    { facts: { running: false }, plan: { claim: false } },
  ];
  for (const row of rows) assert.deepEqual(planClaim({ ...ready, ...row.facts }, 25_000), row.plan, JSON.stringify(row.facts));
});

test("turn ends are listened to only while a command waits for one or the run goes on after the turn's tools", () => {
  const rows = [
    { running: false, held: true, toolTurn: true, wanted: false },
    { running: true, held: false, toolTurn: false, wanted: false },
    { running: true, held: true, toolTurn: false, wanted: true },
    { running: true, held: false, toolTurn: true, wanted: true },
    { running: true, held: true, toolTurn: true, wanted: true },
  ];
  for (const { wanted, ...facts } of rows) assert.equal(wantsTurnEnd(facts), wanted, JSON.stringify(facts));
});

test("delivery: a known id is only ACKed; otherwise deliver idle or at a turn end, hold in between", () => {
  const rows: { alreadyDelivered: boolean; idle: boolean; atBoundary: boolean; plan: string }[] = [
    { alreadyDelivered: true, idle: true, atBoundary: false, plan: "ack-only" },
    { alreadyDelivered: true, idle: false, atBoundary: true, plan: "ack-only" },
    { alreadyDelivered: false, idle: true, atBoundary: false, plan: "deliver" },
    { alreadyDelivered: false, idle: false, atBoundary: true, plan: "deliver" },
    { alreadyDelivered: false, idle: false, atBoundary: false, plan: "hold" },
  ];
  for (const { plan, ...facts } of rows) assert.equal(planDelivery(facts), plan, JSON.stringify(facts));
});

test("an empty idle answer is re-polled at once after a held request and no faster than the interval otherwise; a turn-end one at once", () => {
  assert.equal(repollDelay("idle", 25_000, 1_000), 0);
  assert.equal(repollDelay("idle", 1_000, 1_000), 0);
  assert.equal(repollDelay("idle", 3, 1_000), 997);
  assert.equal(repollDelay("boundary", 3, 1_000), 0);
});

test("only an interrupt leaves commands unanswered, and any later reply answers them", () => {
  const cmd = (id: string): RunFact => ({ kind: "command", commandId: id });
  const reply = (stopReason: string): RunFact => ({ kind: "assistant", stopReason });
  const rows: { facts: RunFact[]; aborted: boolean; expected: string[] }[] = [
    { facts: [cmd("a"), reply("aborted")], aborted: true, expected: ["a"] },
    { facts: [cmd("a"), reply("error")], aborted: true, expected: ["a"] },
    { facts: [cmd("a"), reply("toolUse"), reply("aborted")], aborted: true, expected: [] },
    { facts: [reply("toolUse"), cmd("a"), cmd("b")], aborted: true, expected: ["a", "b"] },
    { facts: [cmd("a"), reply("stop"), cmd("b"), reply("aborted")], aborted: true, expected: ["b"] },
    { facts: [cmd("a"), reply("error")], aborted: false, expected: [] },
    { facts: [], aborted: true, expected: [] },
  ];
  for (const row of rows) assert.deepEqual(unansweredAfterInterrupt(row.facts, row.aborted), row.expected, JSON.stringify(row));
});

test("the interrupted-instruction notice is a valid anon-notify:send request that names the command", () => {
  const notice = interruptedNotice({ commandId: "c-1", eventId: "pi:s:run:1", instruction: "x".repeat(300) }, messagesFor("zh-CN").notice.interrupted);
  assert.deepEqual(SendRequest.parse(notice), notice);
  assert.equal(notice.status, "warning");
  assert.equal(notice.eventId, "cmd-interrupted:c-1");
  assert.deepEqual(notice.details, { command_id: "c-1", event_id: "pi:s:run:1", reason: "interrupted" });
  assert.ok(notice.summary.includes(`${"x".repeat(120)}…`));
  const long = interruptedNotice({ commandId: "c".repeat(100), eventId: "e", instruction: "hi" }, messagesFor("en-US").notice.interrupted);
  assert.equal(long.eventId, undefined);
  assert.deepEqual(
    [long.task, long.summary],
    [
      "Anon's instruction got no answer",
      "The instruction reached the Pi session, but the user interrupted the run before the agent answered. The instruction: hi",
    ],
    "in the session's language",
  );
  assert.equal(notice.task, "Anon 指令未得到回复");
});

test("the session message is the plain instruction, or text then image blocks; ids only in details", () => {
  const base = {
    command_id: "c-9",
    event_id: "ev-1",
    origin: "anon" as const,
    kind: "instruction" as const,
    instruction: "请再跑一次测试",
    created_at: "2026-11-30T03:00:00.000Z",
  };
  const plain = commandMessage({ ...base, images: [] }, "s-1");
  assert.equal(plain.content, "请再跑一次测试");
  assert.equal(plain.customType, "anon-notify:command");
  assert.equal(plain.display, true);
  assert.deepEqual(plain.details, { command_id: "c-9", event_id: "ev-1", session_id: "s-1", origin: "anon" });

  const withImages = commandMessage(
    {
      ...base,
      images: [
        { mime_type: "image/png", data: "iVBORw0KGgo=" },
        { mime_type: "image/gif", data: "R0lGODlh" },
      ],
    },
    "s-1",
  );
  assert.deepEqual(withImages.content, [
    { type: "text", text: "请再跑一次测试" },
    { type: "image", data: "iVBORw0KGgo=", mimeType: "image/png" },
    { type: "image", data: "R0lGODlh", mimeType: "image/gif" },
  ]);
  assert.equal(instructionText(withImages.content), "请再跑一次测试");
  assert.ok(!JSON.stringify(withImages.content).includes("c-9"));
});

test("the journal flushes each id before resolving, survives a reopen, and skips bad lines loudly", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "anon-journal-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, "nested", "commands.jsonl");

  const first = await openCommandJournal(file);
  assert.equal(first.skippedLines, 0);
  assert.equal(first.journal.has("c-1"), false);
  await Promise.all([
    first.journal.record({ command_id: "c-1", event_id: "e-1", session_id: "s", delivered_at: "2026-11-30T03:00:00.000Z" }),
    first.journal.record({ command_id: "c-2", event_id: "e-2", session_id: "s", delivered_at: "2026-11-30T03:00:01.000Z" }),
  ]);
  assert.equal(first.journal.has("c-1"), true);
  assert.equal((await stat(file)).mode & 0o777, 0o600);
  const lines = (await readFile(file, "utf8")).trim().split("\n");
  assert.equal(lines.length, 2);
  assert.deepEqual(JSON.parse(lines[0]!), { version: 1, command_id: "c-1", session_id: "s", event_id: "e-1", delivered_at: "2026-11-30T03:00:00.000Z" });

  await writeFile(file, 'not json\n{"version":9}\n', { flag: "a" });
  // A stop keeps its outcome and the run it stopped, so a repeated ACK names that run again.
  const run = { started_at: "2026-11-30T02:59:00.000Z", task: "整理日志" };
  await first.journal.record({ command_id: "c-3", event_id: "e-3", session_id: "s", delivered_at: "2026-11-30T03:00:02.000Z", outcome: "stopped", run });
  const reopened = await openCommandJournal(file);
  assert.equal(reopened.skippedLines, 2);
  assert.equal(reopened.journal.has("c-2"), true);
  assert.deepEqual(reopened.journal.applied("c-3"), { outcome: "stopped", run });
  assert.deepEqual(reopened.journal.applied("c-2"), { outcome: undefined, run: undefined });
  await assert.rejects(reopened.journal.record({ command_id: "bad id", event_id: "e", session_id: "s", delivered_at: "2026-11-30T03:00:00.000Z" }));
});

test("a journal past its cap is cut back to the newest records at open", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "anon-journal-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const file = join(dir, "commands.jsonl");
  const count = JOURNAL_COMPACT_AT_RECORDS + 1;
  const body = Array.from({ length: count }, (_, i) =>
    JSON.stringify({ version: 1, command_id: `c-${i}`, session_id: "s", event_id: "e", delivered_at: "2026-11-30T03:00:00.000Z" }),
  ).join("\n");
  await writeFile(file, `${body}\n`);
  const { journal } = await openCommandJournal(file);
  assert.equal(journal.has(`c-${count - 1}`), true);
  assert.equal(journal.has("c-0"), true, "the open that compacts still knows every id it read");
  const again = await openCommandJournal(file);
  assert.equal(again.journal.has("c-0"), false);
  assert.equal(again.journal.has(`c-${count - JOURNAL_KEEP_RECORDS}`), true);
  assert.equal((await readFile(file, "utf8")).trim().split("\n").length, JOURNAL_KEEP_RECORDS);
});

test("Pi's own custom-message component draws the instruction under its origin label, then each image", () => {
  initTheme("dark", false);
  const message = commandMessage(
    {
      command_id: "c-1",
      event_id: "e-1",
      origin: "proactive",
      kind: "instruction",
      instruction: "看看这张图",
      images: [{ mime_type: "image/png", data: "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAQAAAC1HAwCAAAAC0lEQVR42mNkYAAAAAYAAjCB0C8AAAAASUVORK5CYII=" }],
      created_at: "2026-11-30T03:00:00.000Z",
    },
    "s-1",
  );
  // A renderer that throws is silently replaced by Pi's default, so the default label must not show.
  const render = (language: "zh-CN" | "en-US") =>
    new CustomMessageComponent(
      { role: "custom", ...message, timestamp: 0 },
      commandMessageRenderer(() => messagesFor(language)),
    )
      .render(60)
      .map((line) => line.replace(/\x1b\[[0-9;]*m/g, "").trim());
  const lines = render("zh-CN");
  assert.ok(lines.includes("[Anon 主动消息]"), lines.join("|"));
  assert.ok(render("en-US").includes("[Message from Anon]"));
  assert.ok(lines.includes("看看这张图"));
  assert.ok(
    lines.some((line) => line.startsWith("[Image: [image/png] 1x1]")),
    "the image is drawn (or its terminal fallback)",
  );
  assert.equal(
    lines.some((line) => line.includes("anon-notify:command")),
    false,
  );
});

test("the control dispatcher: registered handlers by kind, outcomes their kind allows, unknown otherwise", async () => {
  const reports: string[] = [];
  const report = (message: string) => reports.push(message);
  const dispatcher = new ControlDispatcher();
  const command = (kind: string) => ({ commandId: "c-1", kind, payload: {} });
  assert.equal(await dispatcher.dispatch(command("stop"), report), "unknown", "no handler yet");
  const off = dispatcher.on("stop", () => "stopped");
  assert.equal(await dispatcher.dispatch(command("stop"), report), "stopped");
  assert.equal(await dispatcher.dispatch(command("rollback"), report), "unknown", "a kind from a newer server");
  dispatcher.on("approval_decision", () => "stopped");
  assert.equal(await dispatcher.dispatch(command("approval_decision"), report), "unknown", "not an outcome of its kind");
  dispatcher.on("approval_decision", async () => {
    throw new Error("boom");
  });
  assert.equal(await dispatcher.dispatch(command("approval_decision"), report), "unknown");
  assert.ok(reports.some((r) => r.includes("boom")));
  off();
  assert.equal(await dispatcher.dispatch(command("stop"), report), "unknown", "unregistered");
  const cases: [string, Parameters<typeof allowedOutcome>[1], string][] = [
    ["stop", "already_idle", "already_idle"],
    ["stop", "mismatch", "unknown"],
    ["approval_decision", "mismatch", "mismatch"],
    ["approval_decision", "already_answered", "already_answered"],
    ["instruction", "applied", "unknown"],
  ];
  for (const [kind, outcome, expected] of cases) assert.equal(allowedOutcome(kind, outcome), expected, `${kind} ${outcome}`);
});

test("a control command is applied once; one journaled with its outcome is only ACKed again with that outcome", () => {
  const cases: [Parameters<typeof controlStep>[0], ReturnType<typeof controlStep>][] = [
    [{ has: false, outcome: undefined }, { apply: true }],
    [
      { has: true, outcome: "stopped" },
      { apply: false, outcome: "stopped" },
    ],
    [
      { has: true, outcome: "already_idle" },
      { apply: false, outcome: "already_idle" },
    ],
    // An id journaled without an outcome (as an instruction is) was never applied as a control command.
    [{ has: true, outcome: undefined }, { apply: true }],
    // A stop journaled with the run it stopped names that run again.
    [
      { has: true, outcome: "stopped", run: { started_at: "2026-12-01T10:00:00.000Z", task: "整理日志" } },
      { apply: false, outcome: "stopped", run: { started_at: "2026-12-01T10:00:00.000Z", task: "整理日志" } },
    ],
  ];
  for (const [journaled, expected] of cases) assert.deepEqual(controlStep(journaled), expected, JSON.stringify(journaled));
});

test("a stop's ACK names the run it aborted: secrets masked before the cut, cut like a notice's task, the start only when known", () => {
  const startedAt = Date.parse("2026-12-01T10:00:00.000Z");
  const cases: [string, Parameters<typeof stoppedRun>[0], number, ReturnType<typeof stoppedRun>][] = [
    ["no run", undefined, 200, undefined],
    ["a run", { startedAt, startKnown: true, task: "整理日志" }, 200, { started_at: "2026-12-01T10:00:00.000Z", task: "整理日志" }],
    ["joined mid-way: no start", { startedAt, startKnown: false, task: "整理日志" }, 200, { task: "整理日志" }],
    [
      "a literal secret masked",
      { startedAt, startKnown: true, task: "部署 API_TOKEN=abcdef1234567890" },
      200,
      { started_at: "2026-12-01T10:00:00.000Z", task: "部署 API_TOKEN=***" },
    ],
    // Cut first, the secret's tail would no longer end a word and would stay.
    ["masked, then cut", { startedAt, startKnown: false, task: "API_TOKEN=abcdef1234567890 然后部署" }, 14, { task: "API_TOKEN=***…" }],
    ["cut at the configured length", { startedAt, startKnown: false, task: "一二三四五六" }, 4, { task: "一二三…" }],
    ["never past the wire's limit", { startedAt, startKnown: false, task: "长".repeat(500) }, 10_000, { task: `${"长".repeat(199)}…` }],
  ];
  for (const [why, run, max, expected] of cases) assert.deepEqual(stoppedRun(run, max), expected, why);
});
