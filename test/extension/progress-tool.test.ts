import { test } from "node:test";
import assert from "node:assert/strict";
import { EventBody } from "../../protocol/events.ts";
import { ToolCallRecord } from "../../protocol/progress.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import type { NoticeContext } from "../../extension/notices/notice-rules.ts";
import {
  NO_REPORTS,
  ProgressParams,
  REPORTS_PER_MINUTE,
  decideReport,
  progressEvent,
  progressEventId,
  refusedCallRecord,
  type ReportState,
} from "../../extension/notices/progress-tool.ts";

const zhRefusal = messagesFor("zh-CN").notice.refusal;
const T0 = Date.parse("2026-11-30T03:00:00.000Z");
const context: NoticeContext = {
  sessionId: "019a-session",
  runtimeId: "r-1",
  source: "Pi Agent · shop",
  project: "shop",
  content: DEFAULT_CONFIG.content,
  contextUsage: null,
  now: new Date(T0),
  text: messagesFor("zh-CN").notice,
};

/** Feeds calls in order at the given times; returns each decision's kind or refusal code. */
function replay(calls: [atMs: number, input: unknown][], start: ReportState = NO_REPORTS): string[] {
  let state = start;
  return calls.map(([atMs, input]) => {
    const decision = decideReport(state, input, { nowMs: atMs, text: zhRefusal });
    if (decision.kind === "send") state = decision.state;
    return decision.kind === "send" ? "send" : decision.code;
  });
}

test("the parameters are a structure with no way to name a recipient or channel", () => {
  assert.deepEqual(Object.keys(ProgressParams.properties).sort(), ["artifact", "detail", "severity", "stage", "summary"]);
  assert.deepEqual(ProgressParams.required, ["stage", "summary"]);
  assert.equal((ProgressParams as { additionalProperties?: unknown }).additionalProperties, false);
  assert.match(messagesFor("zh-CN").tools.progress.description(REPORTS_PER_MINUTE), /不要为日常步骤/);
  assert.match(messagesFor("en-US").tools.progress.description(REPORTS_PER_MINUTE), /Do not call it for routine steps/);
  const cases: [string, unknown, string][] = [
    ["a recipient", { stage: "done", summary: "好了", chat_id: "attacker" }, "invalid"],
    ["a channel", { stage: "done", summary: "好了", to: "group-1" }, "invalid"],
    ["an unknown stage", { stage: "finished", summary: "好了" }, "invalid"],
    ["a summary over 120 characters", { stage: "done", summary: "长".repeat(121) }, "invalid"],
    ["an empty summary", { stage: "done", summary: "" }, "invalid"],
    ["a non-http artifact", { stage: "done", summary: "好了", artifact: "javascript:alert(1)" }, "invalid"],
    ["a malformed http artifact", { stage: "done", summary: "好了", artifact: "http://" }, "invalid"],
    [
      "an artifact with lines after the link",
      { stage: "done", summary: "好了", artifact: "https://ci.example.com/1\n【Pi Agent 通知 · 失败】\n摘要：伪造" },
      "invalid",
    ],
    ["an artifact with a space", { stage: "done", summary: "好了", artifact: "https://ci.example.com/1 全部通过" }, "invalid"],
    ["an artifact with a line separator", { stage: "done", summary: "好了", artifact: "https://ci.example.com/1\u2028x" }, "invalid"],
    ["not an object", "done", "invalid"],
    [
      "a full report",
      { stage: "failed", summary: "2 个用例失败", detail: "期望 401，实际 200", artifact: "https://ci.example.com/runs/8842", severity: "critical" },
      "send",
    ],
  ];
  for (const [name, input, expected] of cases) assert.deepEqual(replay([[T0, input]]), [expected], name);
});

test("at most six reports a minute per run, and a progress right after a progress is a duplicate", () => {
  const report = (stage: string) => ({ stage, summary: `${stage} 汇报` });
  assert.deepEqual(
    replay([
      [T0, report("progress")],
      [T0 + 1, report("progress")],
      [T0 + 2, report("done")],
      [T0 + 3, report("progress")],
      [T0 + 4, report("blocked")],
      [T0 + 5, report("awaiting_approval")],
      [T0 + 6, report("failed")],
      [T0 + 7, report("done")],
      [T0 + 59_999, report("started")],
      [T0 + 60_000, report("started")],
    ]),
    ["send", "duplicate", "send", "send", "send", "send", "send", "rate_limited", "rate_limited", "send"],
  );
  const full = decideReport({ sentAt: Array.from({ length: REPORTS_PER_MINUTE }, () => T0), lastStage: "done" }, report("done"), {
    nowMs: T0 + 30_000,
    text: zhRefusal,
  });
  assert.equal(full.kind, "refuse");
  assert.match(full.kind === "refuse" ? full.reason : "", /每分钟 6 条.*约 30 秒/, "the model reads why and for how long");
  const english = decideReport({ sentAt: Array.from({ length: REPORTS_PER_MINUTE }, () => T0), lastStage: "done" }, report("done"), {
    nowMs: T0 + 30_000,
    text: messagesFor("en-US").notice.refusal,
  });
  assert.match(english.kind === "refuse" ? english.reason : "", /limit of 6 reports a minute.*about 30 s/, "in the session's language");
  // Refused calls do not count towards the limit.
  assert.deepEqual(
    replay([[T0, report("progress")], ...Array.from({ length: 10 }, (_, i): [number, unknown] => [T0 + i, report("progress")]), [T0 + 20, report("done")]]).at(
      -1,
    ),
    "send",
  );
});

test("subagents and inactive sessions are refused before anything else", () => {
  for (const unavailable of ["subagent", "inactive"] as const) {
    const decision = decideReport(NO_REPORTS, { stage: "done", summary: "好了" }, { nowMs: T0, unavailable, text: zhRefusal });
    assert.equal(decision.kind === "refuse" && decision.code, unavailable);
  }
});

test("a report renders into a notice by code: stage label, severity mark, detail, link, one id per tool call", () => {
  const event = progressEvent(
    {
      stage: "awaiting_approval",
      summary: "需要你确认是否修改 ci-gate 的 3 个文件",
      detail: "改动会加入 HMAC 时间窗校验",
      artifact: "https://git.example.com/pr/7",
      severity: "critical",
    },
    "call_abc|def",
    "支付回归任务",
    context,
  );
  assert.equal(EventBody.parse(event).status, "warning");
  assert.equal(event.summary, "项目 shop：【紧急】等待你确认：需要你确认是否修改 ci-gate 的 3 个文件\n详情：改动会加入 HMAC 时间窗校验");
  const english = progressEvent(
    { stage: "awaiting_approval", summary: "Change 3 files of ci-gate?", detail: "adds an HMAC time window", severity: "critical" },
    "call_1",
    "",
    { ...context, text: messagesFor("en-US").notice },
  );
  assert.equal(
    english.summary,
    "Project shop: [Urgent] Waiting for you: Change 3 files of ci-gate?\nDetails: adds an HMAC time window",
    "in the session's language",
  );
  assert.equal(event.url, "https://git.example.com/pr/7");
  assert.equal(event.task, "支付回归任务");
  assert.deepEqual(event.details, {
    report: { stage: "awaiting_approval", severity: "critical", detail: "改动会加入 HMAC 时间窗校验", artifact: "https://git.example.com/pr/7" },
    tool: "report_progress",
    // What the line says, the agent's sentence a value and its detail the summary's tail.
    said: {
      key: "report",
      params: { project: "shop", stage: "awaiting_approval", severity: "critical", text: "需要你确认是否修改 ci-gate 的 3 个文件", detail_from: 47 },
    },
  });
  assert.equal(Array.from(event.summary).slice(47).join(""), "改动会加入 HMAC 时间窗校验");
  assert.equal(event.event_id, progressEventId(context.sessionId, "call_abc|def"), "a provider's tool-call id with any characters becomes a valid event id");
  assert.equal(event.delivery, "anon");
  const statuses = (["started", "progress", "done", "blocked", "failed"] as const).map(
    (stage) => progressEvent({ stage, summary: "x" }, stage, "", context).status,
  );
  assert.deepEqual(statuses, ["started", "progress", "progress", "warning", "warning"], "a report is never the run's own completion or failure");
});

test("a refused call becomes a valid audit record, even for oversized or odd input", () => {
  const record = refusedCallRecord({ stage: "done", summary: "x", chat_id: "attacker" }, "call|1", "参数无效", context);
  assert.deepEqual(ToolCallRecord.parse(record).input, { stage: "done", summary: "x", chat_id: "attacker" });
  assert.equal(record.decision, "refused");
  assert.equal(ToolCallRecord.safeParse(refusedCallRecord({ summary: "x".repeat(10_000) }, "c", "r", context)).success, true);
  assert.deepEqual(refusedCallRecord("just text", "c", "r", context).input, { value: "just text" });
});
