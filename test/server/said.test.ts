/**
 * `details.said`: the extension's own line, built by the extension's real code in one language,
 * reads in the server's language in the direct notice and the mute digest, the agent's words kept
 * as they came; anything the server cannot check shows the summary unchanged. Table-driven.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { messagesFor } from "../../extension/texts/messages.ts";
import { finalNotice, type NoticeContext } from "../../extension/notices/notice-rules.ts";
import { progressEvent } from "../../extension/notices/progress-tool.ts";
import { needsYouNotice } from "../../extension/approvals/gate.ts";
import { startRun, withAssistant, withLowLevelStart, type RunOutcome } from "../../lifecycle.ts";
import { EventBody } from "../../protocol/events.ts";
import { Said } from "../../protocol/said.ts";
import { formatDirectMessage } from "../../server/handover/direct.ts";
import { saidSummary } from "../../server/locales/said.ts";
import type { Say } from "../../server/locales/load.ts";
import { digestText } from "../../server/mute/decisions.ts";
import { otherLanguage, type Language } from "../helpers/languages.ts";
import { sayIn } from "./say.ts";

const content = { maxTaskChars: 200, maxSummaryChars: 1200, includeProject: true, includeFinalReply: true };

function context(language: Language): NoticeContext {
  return {
    sessionId: "s1",
    runtimeId: "r1",
    source: "Pi Agent · work",
    project: "work",
    content,
    contextUsage: null,
    now: new Date("2026-12-01T00:00:00Z"),
    text: messagesFor(language).notice,
  };
}

function run(reply: string) {
  return withAssistant(withLowLevelStart(startRun(0)), { stopReason: "stop", errorMessage: null, text: reply, entryId: "a1", toolCalls: 0 });
}

const completed: RunOutcome = { kind: "completed", stopReason: "stop" };
const failed: RunOutcome = { kind: "failed", stopReason: "error", reason: "error", errorMessage: "401 unauthorized" };
const OTHER: Record<Language, Language> = { "zh-CN": "en-US", "en-US": "zh-CN" };

/** Each line the extension writes, with what the server shows for it in zh-CN and en-US. */
const LINES: { name: string; build: (language: Language) => EventBody; "zh-CN": string; "en-US": string }[] = [
  {
    name: "a completed run with no reply",
    build: (language) => finalNotice(completed, run(""), context(language), 1)!,
    "zh-CN": "项目 work：任务已完成。",
    "en-US": "Project work: Task completed.",
  },
  {
    name: "a completed run's reply, the agent's words as they came",
    build: (language) => finalNotice(completed, run("All 12 tests pass."), context(language), 1)!,
    "zh-CN": "项目 work：All 12 tests pass.",
    "en-US": "Project work: All 12 tests pass.",
  },
  {
    name: "a failed run with Pi's error text",
    build: (language) => finalNotice(failed, run(""), context(language), 1)!,
    "zh-CN": "项目 work：模型请求出错：401 unauthorized",
    "en-US": "Project work: Failed: the model request failed: 401 unauthorized",
  },
  {
    name: "a failed run with a reply",
    build: (language) => finalNotice({ ...failed, reason: "length", errorMessage: null }, run("Half done"), context(language), 1)!,
    "zh-CN": "项目 work：回复达到长度上限而被截断。\nHalf done",
    "en-US": "Project work: Failed: the reply was cut off at the length limit.\nHalf done",
  },
  {
    name: "a report_progress call with a detail",
    build: (language) =>
      progressEvent({ stage: "blocked", severity: "warn", summary: "Need the DB password", detail: "psql: auth failed" }, "call-1", "work", context(language)),
    "zh-CN": "项目 work：【注意】受阻：Need the DB password\n详情：psql: auth failed",
    "en-US": "Project work: [Attention] Blocked: Need the DB password\nDetails: psql: auth failed",
  },
  {
    name: "a titled dialog Pi waits on, its title as it came",
    build: (language) => needsYouNotice("confirm", "Deploy now?", context(language)),
    "zh-CN": "项目 work：需要你：Pi 正在等你在终端回答「Deploy now?」，回答之前 Agent 不会继续。",
    "en-US": 'Project work: Needs you: Pi is waiting for your answer to "Deploy now?" in the terminal; the agent will not go on until you answer.',
  },
  {
    name: "an untitled dialog, named by its kind",
    build: (language) => needsYouNotice("select", undefined, context(language)),
    "zh-CN": "项目 work：需要你：Pi 正在等你在终端回答一个选择对话框，回答之前 Agent 不会继续。",
    "en-US": "Project work: Needs you: Pi is waiting for your answer to a select dialog in the terminal; the agent will not go on until you answer.",
  },
];

for (const line of LINES) {
  for (const pi of ["zh-CN", "en-US"] as const) {
    const server = OTHER[pi];
    test(`said: ${line.name}, from a Pi in ${pi}, reads in ${server} on the server`, () => {
      const event = EventBody.parse(line.build(pi));
      assert.ok(Said.safeParse(event.details?.said).success, "the extension sent a said line");
      const say = sayIn(server);
      assert.equal(saidSummary(event, say), line[server]);
      // The same line in the words a person reads: the direct notice and the mute digest.
      for (const text of [formatDirectMessage(event, say), digestText([event], say)])
        assert.deepEqual(
          otherLanguage(text, server, [
            "work",
            "Pi Agent",
            event.event_id,
            "All 12 tests pass",
            "Half done",
            "Need the DB password",
            "psql: auth failed",
            "401 unauthorized",
            "Deploy now?",
          ]),
          [],
          text,
        );
      assert.equal(saidSummary(event, sayIn(pi)), event.summary, "in Pi's own language the server says what Pi said");
    });
  }
}

/** What a server must not word: each is the summary unchanged. */
const completedZh = () => EventBody.parse(finalNotice(completed, run(""), context("zh-CN"), 1)!);
const withSaid = (event: EventBody, said: unknown, patch: Partial<EventBody> = {}): EventBody => ({ ...event, ...patch, details: { ...event.details, said } });
const REFUSED: [string, () => EventBody][] = [
  ["an unknown key", () => withSaid(completedZh(), { key: "run_approved", params: {} })],
  ["a key that disagrees with the status", () => withSaid(completedZh(), { key: "run_completed", params: {} }, { status: "failed" })],
  ["a failure said of a completed run", () => withSaid(completedZh(), { key: "run_failed", params: { reason: "error" } })],
  ["a dialog said of a completed run", () => withSaid(completedZh(), { key: "needs_you", params: { kind: "select" } })],
  ["an unknown dialog kind", () => withSaid(completedZh(), { key: "needs_you", params: { kind: "modal" } }, { status: "warning" })],
  ["an unknown failure reason", () => withSaid(completedZh(), { key: "run_failed", params: { reason: "sabotage" } }, { status: "failed" })],
  ["an extra value", () => withSaid(completedZh(), { key: "run_completed", params: { status: "failed" } })],
  ["values that are not an object", () => withSaid(completedZh(), { key: "run_completed", params: "<b>done</b>" })],
  ["an offset past the summary", () => withSaid(completedZh(), { key: "run_completed", params: { reply_from: 999 } })],
  ["a negative offset", () => withSaid(completedZh(), { key: "run_completed", params: { reply_from: -3 } })],
  ["another sender's id (ext:)", () => ({ ...completedZh(), event_id: "ext:s1:deploy" })],
  ["a server's own id", () => ({ ...completedZh(), event_id: "watchdog:s1" })],
  ["no said at all (an older extension)", () => ({ ...completedZh(), details: { stop_reason: "stop" } })],
  [
    "said inherited, not its own",
    () => ({ ...completedZh(), details: Object.create({ said: { key: "run_completed", params: {} } }) as Record<string, unknown> }),
  ],
];
for (const [name, build] of REFUSED) {
  test(`said refused, the summary shown unchanged: ${name}`, () => {
    const event = build();
    const say: Say = sayIn("en-US");
    assert.equal(saidSummary(event, say), event.summary);
    assert.ok(formatDirectMessage(event, say).includes(`Summary: ${event.summary}`));
  });
}

test("another extension's said is dropped by the extension before it is sent", async () => {
  const { externalNotice } = await import("../../extension/notices/notice-rules.ts");
  const event = externalNotice(
    { status: "completed", summary: "deploy failed", details: { said: { key: "run_completed", params: {} }, keep: 1 } },
    "g1",
    context("en-US"),
  );
  assert.deepEqual(event.details, { keep: 1 });
});

test("the console: a checked line goes to the page with the agent's words; a forged one is the summary as carried", async () => {
  const { timelineSay, saidOf } = await import("../../server/console/run-rules.ts");
  const row = (event: EventBody) => ({ action: "event.accepted", actor: "agent" as const, data: { event } });
  const good = EventBody.parse(finalNotice(completed, run("All 12 tests pass."), context("zh-CN"), 1)!);
  assert.deepEqual(timelineSay(row(good)).said, { said: { key: "run_completed", params: { project: "work", reply_from: 8 } }, agent: "All 12 tests pass." });
  for (const [name, build] of REFUSED) {
    const event = build();
    assert.equal(timelineSay(row(event)).said, undefined, name);
    assert.equal(timelineSay(row(event)).params.summary, event.summary, name);
    assert.equal(saidOf(event), null, name);
  }
});
