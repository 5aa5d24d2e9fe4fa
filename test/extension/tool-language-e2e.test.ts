/**
 * What the model reads about this extension's tools, in a REAL Pi session (SDK + faux model)
 * talking to the REAL notify-webhook plugin: the descriptions, the parameters and the system
 * prompt's lines about `ask_approval` and `report_progress` are in the language the person chose.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { ASK_TOOL_NAME } from "../../extension/approvals/gate.ts";
import { PROGRESS_TOOL_NAME } from "../../extension/notices/progress-tool.ts";
import { RECIPIENT, piOnServer } from "../../harness/extension-env.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { ai, type PiHarness } from "../../harness/pi.ts";
import { MockBot } from "../server/persona-standin.ts";

const CJK = /[\u3000-\u30ff\u3400-\u9fff\uff00-\uffef]/;

async function session(t: TestContext, language: string): Promise<PiHarness> {
  const koishi = await startKoishi({
    config: { botId: "mock:514", recipientId: RECIPIENT.qq },
    plugins: (use) => void use(MockBot, { selfId: "514" }),
  });
  const pi = await piOnServer(t, koishi, { userConfig: { language, approval: { enabled: true }, progressTool: { enabled: true } } });
  await pi.prompt("/anon-notify");
  pi.script([ai.fauxAssistantMessage("ok")]);
  await pi.prompt("go");
  return pi;
}

/** What the model was told about our two tools in its first call: their system prompt lines and definitions. */
function toldAbout(pi: PiHarness): string {
  const ours = [ASK_TOOL_NAME, PROGRESS_TOOL_NAME];
  const told: unknown[] = [];
  for (const message of pi.modelCalls[0]!.messages) {
    const m = message as { sections?: { tools?: string }; toolsAdded?: { name: string }[] };
    for (const line of m.sections?.tools?.split("\n") ?? []) if (ours.some((name) => line.startsWith(`- ${name}:`))) told.push(line);
    for (const tool of m.toolsAdded ?? []) if (ours.includes(tool.name)) told.push(tool);
  }
  assert.equal(told.length, 4, "both tools are in the prompt's list and offered with their definitions");
  return JSON.stringify(told);
}

test("in English the model reads the tools' descriptions, parameters and prompt lines in English, with no Chinese", { timeout: 90_000 }, async (t) => {
  const told = toldAbout(await session(t, "en-US"));
  assert.doesNotMatch(told, CJK);
  assert.ok(told.includes("- ask_approval: Ask the user to approve a risky or irreversible operation before doing it"), told);
  assert.ok(told.includes("Go ahead only on approved; on rejected or timeout do not perform the operation"), told);
  assert.ok(told.includes('"description":"Why the operation is needed (≤200 characters)"'), told);
  assert.ok(told.includes("at most 6 reports a minute per run"), told);
  assert.ok(told.includes('"description":"The outcome in one sentence; do not list the steps"'), told);
});

test("in Chinese the model reads the same in Chinese", { timeout: 90_000 }, async (t) => {
  const told = toldAbout(await session(t, "zh-CN"));
  assert.ok(told.includes("- ask_approval: 执行有风险或不可逆的操作前请用户批准"), told);
  assert.ok(told.includes('"description":"为什么需要这个操作（≤200 字）"'), told);
  assert.ok(told.includes("每次运行每分钟最多 6 条"), told);
  assert.ok(told.includes('"description":"一句话结论，不要罗列过程"'), told);
  assert.doesNotMatch(told, /Ask the user|the user|Report progress to/);
});
