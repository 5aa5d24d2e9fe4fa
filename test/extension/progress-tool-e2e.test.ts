/**
 * report_progress end to end: the extension as Pi loads it, in a REAL Pi session (SDK + faux
 * model), switched on with `/anon-notify`, reporting to the REAL notify-webhook plugin (loopback,
 * SQLite) with a YesImBot v3 stand-in as the persona.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { PROGRESS_TOOL_NAME } from "../../extension/notices/progress-tool.ts";
import { AuditPage, type AuditEntry } from "../../protocol/audit.ts";
import { RECIPIENT, piOnServer } from "../../harness/extension-env.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { ai, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { withPersona, worldState } from "../server/persona-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

async function setup(t: TestContext, progressTool: boolean, pi: StartPiOptions = {}) {
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, botId: "mock:514", recipientId: RECIPIENT.qq, injectRetryDelayMs: 10 },
    plugins: withPersona,
  });
  const harness = await piOnServer(t, koishi, { ...pi, userConfig: { progressTool: { enabled: progressTool } } });
  return { koishi, pi: harness, sessionId: harness.session.sessionManager.getSessionId() };
}

/** Whether the model was offered the tool in a given call: the transcript's system messages add and remove tools. */
function offered(pi: PiHarness, call: number): boolean {
  const tools = new Set<string>();
  for (const message of pi.modelCalls[call]!.messages) {
    const change = message as { toolsAdded?: { name: string }[]; toolsRemoved?: { name: string }[] };
    for (const tool of change.toolsAdded ?? []) tools.add(tool.name);
    for (const tool of change.toolsRemoved ?? []) tools.delete(tool.name);
  }
  return tools.has(PROGRESS_TOOL_NAME);
}

function report(stage: string, summary: string, extra: Record<string, unknown> = {}) {
  return ai.fauxAssistantMessage([ai.fauxToolCall(PROGRESS_TOOL_NAME, { stage, summary, ...extra })], { stopReason: "toolUse" });
}

async function audit(koishi: KoishiHarness, sessionId: string): Promise<AuditEntry[]> {
  const answer = await call(koishi, "GET", `/operator/audit?session_id=${sessionId}&limit=200`, undefined, OPERATOR_TOKEN);
  return AuditPage.parse(answer.body).entries;
}

/** What the model read back from each of its report_progress calls, in order. */
function toolAnswers(pi: PiHarness): string[] {
  return pi.session.sessionManager
    .getBranch()
    .filter((e) => e.type === "message" && e.message.role === "toolResult" && e.message.toolName === PROGRESS_TOOL_NAME)
    .map((e) => JSON.stringify((e as { message: { content: unknown } }).message.content));
}

test("off by default: an active session's model is offered no tool of ours", { timeout: 60_000 }, async (t) => {
  const { pi } = await setup(t, false);
  await pi.prompt("/anon-notify");
  pi.script([ai.fauxAssistantMessage("好的")]);
  await pi.prompt("做点事");
  assert.equal(offered(pi, 0), false);
  assert.equal(pi.session.getActiveToolNames().includes(PROGRESS_TOOL_NAME), false);
});

test("enabled: offered only while active; reports are rendered, limited, deduplicated and audited, and cannot address anyone", {
  timeout: 90_000,
}, async (t) => {
  const { koishi, pi, sessionId } = await setup(t, true);
  pi.script([ai.fauxAssistantMessage("未开启")]);
  await pi.prompt("开启之前");
  assert.equal(offered(pi, 0), false, "not offered before the session is switched on");

  await pi.prompt("/anon-notify");
  pi.script([
    report("progress", "开始拆分模块"),
    report("progress", "还在拆分"),
    report("done", "模块拆分完成", { artifact: "https://ci.example.com/runs/1" }),
    report("done", "想发到别的群", { chat_id: "attacker-group" }),
    report("blocked", "缺少数据库密码"),
    report("awaiting_approval", "需要你确认是否删除旧表", { severity: "critical" }),
    report("failed", "迁移失败", { detail: "外键冲突" }),
    report("done", "第六条"),
    report("started", "第七条，超过上限"),
    ai.fauxAssistantMessage("全部完成。"),
  ]);
  await pi.prompt("重构并汇报");
  assert.equal(offered(pi, 1), true, "offered once active");

  const answers = toolAnswers(pi);
  assert.equal(answers.length, 9);
  const outcomes = answers.map((a) => (a.includes("已提交") ? "sent" : a.includes("同一阶段") ? "duplicate" : a.includes("上限") ? "rate_limited" : "refused"));
  assert.deepEqual(outcomes, ["sent", "duplicate", "sent", "refused", "sent", "sent", "sent", "sent", "rate_limited"]);
  assert.match(answers[3]!, /chat_id/, "a call naming a recipient is refused, and the model is told which parameter");

  // Six reports reached the persona, rendered by code; the refused ones reached only the audit trail.
  const texts = await waitUntil(() => {
    const found = worldState(koishi)
      .recorded.map((r) => r.message)
      .filter((m) => m.includes('"tool":"report_progress"'));
    return found.length === 6 ? found : undefined;
  }, "six reports delivered");
  assert.ok(texts.some((m) => m.includes("阶段完成：模块拆分完成") && m.includes("https://ci.example.com/runs/1")));
  assert.ok(texts.some((m) => m.includes("【紧急】等待你确认：需要你确认是否删除旧表")));
  assert.ok(texts.every((m) => !m.includes("attacker-group") && !m.includes("第七条")));

  const rows = await waitUntil(async () => {
    const all = await audit(koishi, sessionId);
    return all.filter((e) => e.action === "tool_call.refused").length >= 3 ? all : undefined;
  }, "refused calls audited");
  const accepted = rows.filter((e) => e.action === "event.accepted" && (e.data.event as { details?: { tool?: string } }).details?.tool === PROGRESS_TOOL_NAME);
  assert.equal(accepted.length, 6, "every sent report is on the trail through its event");
  const refused = rows.filter((e) => e.action === "tool_call.refused");
  assert.ok(refused.some((e) => String(e.data.reason).includes("同一阶段")));
  assert.ok(refused.some((e) => String(e.data.reason).includes("上限")));
  const addressed = refused.find((e) => (e.data.input as { chat_id?: string }).chat_id === "attacker-group");
  assert.match(String(addressed?.data.reason), /^参数无效/, "the call that named a recipient is on the trail as refused");
  assert.equal(JSON.stringify(rows).includes(koishi.token), false);

  // Switched off: the tool leaves the model's list.
  await pi.prompt("/anon-notify");
  pi.script([ai.fauxAssistantMessage("已关闭")]);
  await pi.prompt("关闭之后");
  assert.equal(offered(pi, pi.modelCalls.length - 1), false);
});

test("in a subagent the tool is never offered and a call to it sends nothing", { timeout: 60_000 }, async (t) => {
  const { koishi, pi, sessionId } = await setup(t, true, { mode: "json", persist: false });
  await pi.prompt("/anon-notify");
  pi.script([report("done", "子 Agent 想汇报"), ai.fauxAssistantMessage("结束")]);
  await pi.prompt("子任务");
  assert.equal(offered(pi, 0), false);
  const answer = JSON.stringify(pi.session.sessionManager.getBranch().filter((e) => e.type === "message" && e.message.role === "toolResult"));
  assert.doesNotMatch(answer, /已提交/);
  assert.deepEqual(await audit(koishi, sessionId), []);
  assert.equal(worldState(koishi).recorded.length, 0);
});
