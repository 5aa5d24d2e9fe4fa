/**
 * The session view's runs (server/console/run-rules.ts), as tables: audit rows in, runs out.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { AuditEntry } from "../../protocol/audit.ts";
import { sessionRuns, timelineSay, type RunView } from "../../server/console/run-rules.ts";
import { timelineLines, type Board } from "../../server/console/decisions.ts";
import messages from "../../console/client/messages.ts";
import { CONSOLE_ACTIONS } from "../../server/console/actions.ts";

let nextId = 0;
const T0 = Date.parse("2026-12-01T10:00:00.000Z");
const at = (seconds: number) => new Date(T0 + seconds * 1000).toISOString();

function event(seconds: number, status: string, extra: Record<string, unknown> = {}): AuditEntry {
  return {
    id: ++nextId,
    at: at(seconds + 0.1),
    actor: "agent",
    action: "event.accepted",
    session_id: "s-1",
    subject: `e-${nextId}`,
    data: { event: { status, task: "整理日志", summary: `${status} summary`, created_at: at(seconds), details: null, context_usage: null, ...extra } },
  };
}
function command(seconds: number, state: string, id: string, data: Record<string, unknown>, actor: AuditEntry["actor"] = "agent"): AuditEntry {
  return { id: ++nextId, at: at(seconds), actor, action: `command.${state}`, session_id: "s-1", subject: id, data };
}

type Row = [string, AuditEntry[], Partial<RunView>[]];
const context = { used_tokens: 5000, context_window: 100_000, percent: 5 };

test("runs from the trail: outcomes, who stopped, durations when the start is known, newest first", () => {
  const rows: Row[] = [
    ["nothing on the trail", [], []],
    [
      "started, progress, completed: done, with its duration, reply and context use",
      [event(0, "started"), event(30, "progress", { summary: "测试跑了一半" }), event(180, "completed", { summary: "**全部完成**", context_usage: context })],
      [
        {
          outcome: "done",
          task: "整理日志",
          started_at: at(0),
          ended_at: at(180),
          duration_ms: 180_000,
          reply: "**全部完成**",
          context,
          latest: { at: at(30), status: "progress", summary: "测试跑了一半", said: null },
          failure: null,
        },
      ],
    ],
    [
      "only the final notice (start notices off): done, no start, no duration",
      [event(60, "completed")],
      [{ outcome: "done", started_at: null, ended_at: at(60), duration_ms: null }],
    ],
    [
      "only the final notice, which says when the run began: its start and duration from it",
      [event(60, "completed", { details: { stop_reason: "stop", run_started_at: at(15) } })],
      [{ outcome: "done", started_at: at(15), ended_at: at(60), duration_ms: 45_000 }],
    ],
    [
      "a reported start after the notice, or not a time, is not believed",
      [
        event(60, "completed", { details: { stop_reason: "stop", run_started_at: at(61) } }),
        event(90, "failed", { details: { stop_reason: "error", run_started_at: "yesterday" } }),
      ],
      [
        { outcome: "failed", started_at: null, duration_ms: null },
        { outcome: "done", started_at: null, duration_ms: null },
      ],
    ],
    [
      "a started notice's time wins over the reported one",
      [event(0, "started"), event(30, "completed", { details: { stop_reason: "stop", run_started_at: at(10) } })],
      [{ outcome: "done", started_at: at(0), duration_ms: 30_000 }],
    ],
    [
      "failed, and why",
      [event(0, "started"), event(5, "failed", { details: { stop_reason: "error", failure_reason: "model_error" } })],
      [{ outcome: "failed", failure: "model_error", duration_ms: 5000 }],
    ],
    [
      "an instruction the session took starts the run; a stop the session confirmed ends it, naming who asked",
      [
        command(0, "pending", "c-1", { kind: "instruction", instruction: "写一篇长文" }, "console"),
        command(1, "accepted", "c-1", { kind: "instruction" }),
        command(20, "pending", "c-2", { kind: "stop" }, "console"),
        command(21, "accepted", "c-2", { kind: "stop", outcome: "stopped" }),
      ],
      [{ outcome: "stopped", stopped_by: "console", task: "写一篇长文", started_at: at(1), ended_at: at(21), duration_ms: 20_000 }],
    ],
    [
      "a confirmed stop with no run on the trail (typed in the terminal, start notices off) is a stopped run, its task and start unknown",
      [event(0, "completed"), command(30, "pending", "c-5", { kind: "stop" }, "console"), command(31, "accepted", "c-5", { kind: "stop", outcome: "stopped" })],
      [
        { outcome: "stopped", stopped_by: "console", task: "", started_at: null, ended_at: at(31), duration_ms: null },
        { outcome: "done", ended_at: at(0) },
      ],
    ],
    [
      "a confirmed stop whose ACK names the run (typed in the terminal): its task and start from the ACK",
      [
        event(0, "completed"),
        command(30, "pending", "c-8", { kind: "stop" }, "console"),
        command(31, "accepted", "c-8", { kind: "stop", outcome: "stopped", run: { started_at: at(10), task: "整理 <b>日志</b>" } }),
      ],
      [{ outcome: "stopped", stopped_by: "console", task: "整理 <b>日志</b>", started_at: at(10), ended_at: at(31), duration_ms: 21_000 }, { outcome: "done" }],
    ],
    [
      "an ACK's start after the ACK, before the run before it ended, or not a time is not believed; a run that is not one is ignored",
      [
        event(20, "completed"),
        command(30, "accepted", "c-9", { kind: "stop", outcome: "stopped", run: { started_at: at(40), task: "后来" } }),
        command(50, "accepted", "c-10", { kind: "stop", outcome: "stopped", run: { started_at: at(5), task: "重叠" } }),
        command(60, "accepted", "c-11", { kind: "stop", outcome: "stopped", run: { started_at: "yesterday", task: "坏" } }),
        command(70, "accepted", "c-12", { kind: "stop", outcome: "stopped", run: { task: "没说开始" } }),
      ],
      [
        { outcome: "stopped", task: "没说开始", started_at: null, duration_ms: null },
        { outcome: "stopped", task: "", started_at: null, duration_ms: null },
        { outcome: "stopped", task: "重叠", started_at: null, duration_ms: null },
        { outcome: "stopped", task: "后来", started_at: null, duration_ms: null },
        { outcome: "done" },
      ],
    ],
    [
      "an open run takes from the stop's ACK only what it lacks",
      [
        command(0, "pending", "c-13", { kind: "instruction", instruction: "写一篇长文" }, "console"),
        command(1, "accepted", "c-13", { kind: "instruction" }),
        command(21, "accepted", "c-14", { kind: "stop", outcome: "stopped", run: { started_at: at(0.5), task: "别的任务" } }),
        event(30, "progress", { task: "" }),
        command(41, "accepted", "c-15", { kind: "stop", outcome: "stopped", run: { started_at: at(25), task: "进度里的任务" } }),
      ],
      [
        { outcome: "stopped", task: "进度里的任务", started_at: at(25), duration_ms: 16_000 },
        { outcome: "stopped", task: "写一篇长文", started_at: at(1), duration_ms: 20_000 },
      ],
    ],
    [
      "an instruction whose ACK comes after its run's final notice opens no second run",
      [
        command(0, "pending", "c-6", { kind: "instruction", instruction: "请更新 README" }, "console"),
        command(1, "leased", "c-6", { kind: "instruction" }),
        event(3, "completed", { task: "请更新 README", details: { stop_reason: "stop", run_started_at: at(1) } }),
        command(4, "accepted", "c-6", { kind: "instruction" }),
      ],
      [{ outcome: "done", task: "请更新 README", duration_ms: 2_000 }],
    ],
    [
      "an instruction taken after the newest run ended opens its own run",
      [
        event(0, "completed"),
        command(5, "pending", "c-7", { kind: "instruction", instruction: "再来" }, "console"),
        command(6, "leased", "c-7", { kind: "instruction" }),
        command(7, "accepted", "c-7", { kind: "instruction" }),
      ],
      [{ outcome: "running", task: "再来", started_at: at(7) }, { outcome: "done" }],
    ],
    [
      "a stop that found the session idle ends nothing",
      [
        event(0, "completed"),
        command(5, "pending", "c-3", { kind: "stop" }, "operator"),
        command(6, "accepted", "c-3", { kind: "stop", outcome: "already_idle" }),
      ],
      [{ outcome: "done" }],
    ],
    [
      "a run that never told its end is interrupted when the next one starts; the open one is running",
      [event(0, "started"), event(10, "tool_error", { summary: "bash 失败" }), event(100, "started", { task: "第二个任务" })],
      [
        { outcome: "running", task: "第二个任务", started_at: at(100), ended_at: null },
        {
          outcome: "interrupted",
          started_at: at(0),
          ended_at: at(10),
          duration_ms: 10_000,
          latest: { at: at(10), status: "tool_error", summary: "bash 失败", said: null },
        },
      ],
    ],
    [
      "an instruction taken while a run is open joins it",
      [
        event(0, "started"),
        command(5, "pending", "c-4", { kind: "instruction", instruction: "顺便" }, "console"),
        command(6, "accepted", "c-4", { kind: "instruction" }),
        event(9, "completed"),
      ],
      [{ outcome: "done", task: "整理日志", duration_ms: 9000 }],
    ],
  ];
  for (const [why, entries, expected] of rows) {
    const runs = sessionRuns([...entries].reverse());
    assert.equal(runs.length, expected.length, why);
    expected.forEach((want, index) => {
      const got = runs[index]!;
      for (const [key, value] of Object.entries(want)) assert.deepEqual(got[key as keyof RunView], value, `${why}: run ${index} ${key}`);
    });
  }
});

test("at most the newest maxRuns runs are kept", () => {
  const entries = Array.from({ length: 5 }, (_, index) => event(index * 10, "completed", { summary: `run ${index}` }));
  assert.deepEqual(
    sessionRuns(entries, { maxRuns: 2 }).map((run) => run.reply),
    ["run 4", "run 3"],
  );
});

test("each timeline line in words: a sentence key and its values, never the raw block", () => {
  const row = (action: string, data: Record<string, unknown>, actor: AuditEntry["actor"] = "agent") => ({ action, actor, data });
  const rows: [ReturnType<typeof row>, string, Record<string, string>][] = [
    [
      row("event.accepted", { event: { status: "completed", task: "整理日志", summary: "done\n\n**ok**", details: null } }),
      "finished",
      { task: "整理日志", summary: "done **ok**", why: "" },
    ],
    [
      row("event.accepted", { event: { status: "failed", task: "t", summary: "s", details: { stop_reason: "error", failure_reason: "model_error" } } }),
      "failed",
      { task: "t", summary: "s", why: "model_error" },
    ],
    [row("event.handed_to_persona", { outcome: { kind: "injected" }, text: "[EXTERNAL_AUTOMATION_EVENT]…" }, "server"), "told_anon", {}],
    [row("event.handed_to_persona", { outcome: { kind: "failed", error: "no_persona" } }, "server"), "told_anon_failed", { why: "no_persona" }],
    [row("command.pending", { kind: "instruction", instruction: "请更新 README" }, "console"), "queued", { by: "console", text: "请更新 README" }],
    [row("command.pending", { kind: "stop" }, "console"), "stop_asked", { by: "console" }],
    [row("command.accepted", { kind: "stop", outcome: "stopped" }), "stopped", {}],
    [row("command.accepted", { kind: "stop", outcome: "already_idle" }), "already_idle", {}],
    [
      row("approval.decided", { code: "KCYUW", decision: "approved", via: "chat" }, "operator"),
      "approval_decided",
      { code: "KCYUW", decision: "approved", via: "chat" },
    ],
    [row("console.send", { status: "refused", error: "session_offline" }, "console"), "page_refused", { verb: "send", status: "session_offline" }],
    [row("watchdog.stalled", {}, "watchdog"), "watchdog_stalled", {}],
    [row("watchdog.vanished_cleared", {}, "watchdog"), "watchdog_cleared", {}],
    [row("something.new", {}, "server"), "other", { action: "something.new" }],
  ];
  for (const [entry, key, params] of rows) assert.deepEqual(timelineSay(entry), { key, params }, entry.action);
});

/** A line as the page words it for project "work" (timeline.vue's `sentence`, without vue-i18n). */
function worded(line: { key: string; params: Record<string, string> }, locale: "zh-CN" | "en-US"): string {
  const texts = messages[locale];
  const template = line.key.split(".").reduce<unknown>((node, part) => (node as Record<string, unknown>)[part], texts.say) as string;
  const params: Record<string, string> = { ...line.params, project: "work", ...(line.params.verb ? { verb: texts.pageVerb[line.params.verb as "send"] } : {}) };
  return template.replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? `{${name}}`);
}

test("timeline lines say what happened, in both languages: a notice only printed, a stop taken, page actions as a person words them", () => {
  const row = (action: string, data: Record<string, unknown>, actor: AuditEntry["actor"] = "server") => ({ action, actor, data });
  const cases: [ReturnType<typeof row>, string, string][] = [
    [
      row("event.handed_to_persona", { persona: "log", outcome: { kind: "injected" } }),
      "Only printed in the server's terminal: no persona, nobody was told",
      "只打印在服务端终端：没有人格，没有告诉任何人",
    ],
    [row("event.handed_to_persona", { persona: "yesimbot", outcome: { kind: "injected" } }), "Anon was told", "已告诉 Anon"],
    [row("command.leased", { kind: "stop" }, "agent"), "work took the stop request", "work 领取了打断请求"],
    [row("command.leased", { kind: "instruction" }, "agent"), "work took the instruction", "work 领取了指令"],
    [row("console.decide", { status: "ok" }, "console"), "An approval was answered from the page", "在页面上答复了审批"],
    [row("console.send", { status: "ok" }, "console"), "An instruction was sent from the page", "在页面上发出了一条指令"],
    [
      row("console.stop", { status: "refused", error: "session_offline" }, "console"),
      "The page could not stop a run (session_offline)",
      "页面上的操作没有成功：打断运行（session_offline）",
    ],
  ];
  for (const [entry, en, zh] of cases) {
    assert.equal(worded(timelineSay(entry), "en-US"), en, entry.action);
    assert.equal(worded(timelineSay(entry), "zh-CN"), zh, entry.action);
  }
  assert.doesNotMatch(messages["en-US"].receipt.context_injected, /Anon/, "a receipt badge names no persona it may not have reached");
  assert.doesNotMatch(messages["zh-CN"].receipt.context_injected, /Anon/);
});

test("every action the page can take is worded in the timeline, done and refused, in both languages", () => {
  for (const name of Object.keys(CONSOLE_ACTIONS)) {
    const verb = name.replace("anon-notify/", "");
    for (const locale of ["en-US", "zh-CN"] as const) {
      for (const status of ["ok", "refused"]) {
        const line = worded(timelineSay({ action: `console.${verb}`, actor: "console", data: { status, error: "x" } }), locale);
        assert.doesNotMatch(line, /[{}]|undefined|page_done|pageVerb/, `${locale} ${verb} ${status}: ${line}`);
      }
    }
  }
});

test("the page's timeline: a run of sign-ins is one line with its count; a gone session is named by the project its notice recorded", () => {
  const entry = (id: number, action: string, data: Record<string, unknown> = {}, session_id: string | null = null): AuditEntry => ({
    id,
    at: new Date(1_700_000_000_000 + id * 1000).toISOString(),
    actor: "server",
    action,
    session_id,
    subject: null,
    data,
  });
  const newestFirst = [
    entry(6, "console.sign_in"),
    entry(5, "console.sign_in"),
    entry(4, "console.sign_in"),
    entry(3, "command.leased", { kind: "stop" }, "01a23449-gone"),
    entry(2, "event.accepted", { event: { status: "completed", task: "t", summary: "s" }, project: "web-shop" }, "01a23449-gone"),
    entry(1, "console.sign_in"),
  ];
  const entries = newestFirst.map((item) => (item.id === 2 ? { ...item, subject: "ev-2" } : item));
  const lines = timelineLines(entries, [{ event_id: "ev-2", state: "context_injected", attempts: 1, error: null }], new Map() as Board);
  assert.deepEqual(
    lines.map((line) => [line.id, line.say.key, line.project]),
    [
      [6, "signed_in_times", null],
      [3, "taken.stop", "web-shop"],
      [2, "finished", "web-shop"],
      [1, "signed_in", null],
    ],
  );
  assert.equal(lines[1]!.receipt, null);
  assert.deepEqual(lines[2]!.receipt, { state: "context_injected", attempts: 1, error: null }, "an accepted event with its receipt now");
  assert.equal(worded(lines[0]!.say, "en-US"), "Browsers signed in with the console token 3 times");
  assert.equal(worded(lines[0]!.say, "zh-CN"), "浏览器用控制台 Token 登录了 3 次");
});
