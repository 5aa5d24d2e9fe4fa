/**
 * The extension's own notice lines read in the server's language, whatever language Pi speaks: a
 * REAL Pi session (SDK, faux model) in one language, the REAL notify-webhook plugin in Koishi in
 * the other, plugin-mock chat for the owner. A completed run, a failed run and a report_progress
 * call are sent by the extension as it runs; each notice the server stored is then sent to the
 * owner on the direct route (the extension's own notices go to the persona, so the test hands the
 * same bodies to the direct route under their own `pi:` ids). Every chat message holds no word of
 * Pi's language, only the agent's own words and names; a forged `said` shows the summary as it came.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { basename } from "node:path";
import { startChat, type ChatHarness } from "../../harness/chat.ts";
import { postEvent } from "../../harness/event-client.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { ai, failingTool } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { EventBody, type EventStatus } from "../../protocol/events.ts";
import { readSaid } from "../../protocol/said.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { otherLanguage } from "../helpers/languages.ts";

const REPLY = "All 12 tests pass";
const ERROR = "401 invalid api key";
const REPORT = { stage: "blocked", severity: "warn", summary: "Need the DB password", detail: "psql auth failed" };

async function stored(chat: ChatHarness, status: EventStatus): Promise<EventBody> {
  return waitUntil(
    async () => {
      const rows = await chat.app.database.get(EVENT_TABLE, { status });
      return rows[0] ? EventBody.parse(JSON.parse(rows[0].body)) : undefined;
    },
    `the ${status} notice stored`,
    30_000,
  );
}

/** Sends `event` to the owner directly and returns the chat message it became. */
async function direct(chat: ChatHarness, event: EventBody): Promise<string> {
  const eventId = `${event.event_id}:direct`;
  assert.equal((await postEvent(chat, { ...event, event_id: eventId, delivery: "direct" })).status, 202);
  return (await waitUntil(() => chat.sent.find((m) => m.text.includes(eventId)), `${eventId} sent to the owner`, 30_000)).text;
}

for (const [piLanguage, serverLanguage] of [
  ["zh-CN", "en-US"],
  ["en-US", "zh-CN"],
] as const) {
  test(`a Pi in ${piLanguage}, a server in ${serverLanguage}: run and report notices read in ${serverLanguage} alone, the agent's words as they came`, {
    timeout: 180_000,
  }, async (t) => {
    const chat = await startChat({ locales: [serverLanguage] });
    const pi = await piOnServer(t, chat, {
      tools: [failingTool("explode", "disk full")],
      userConfig: {
        language: piLanguage,
        progressTool: { enabled: true },
        // Every notice the extension words itself: a start, a progress after each tool call, a tool's error.
        notify: { started: true, progress: true, toolError: true },
        progress: { toolCountThreshold: 1 },
        // Not throttled, so each of them goes out.
        delivery: { minIntervalMs: 0 },
      },
    });
    await pi.prompt("/anon-notify");
    const project = basename(pi.cwd);

    pi.script([
      ai.fauxAssistantMessage([ai.fauxToolCall("report_progress", REPORT)], { stopReason: "toolUse" }),
      ai.fauxAssistantMessage([ai.fauxToolCall("explode", {})], { stopReason: "toolUse" }),
      ai.fauxAssistantMessage(REPLY),
    ]);
    await pi.prompt("run the tests");
    pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: ERROR })]);
    await pi.prompt("deploy");

    // The agent's words, the user's own tasks and names.
    const verbatim = [project, REPLY, ERROR, REPORT.summary, REPORT.detail, "run the tests", "deploy", "explode", "Pi Agent", "tokens"];
    const words = {
      "en-US": {
        completed: `Project ${project}: ${REPLY}`,
        failed: "Failed: the model request failed",
        warning: "[Attention] Blocked: Need the DB password",
        started: "Started working on the task.",
        progress: "Still running: 0 min so far, 1 tool calls done.",
        tool_error: "Tool explode failed: disk full",
      },
      "zh-CN": {
        completed: `项目 ${project}：${REPLY}`,
        failed: "模型请求出错",
        warning: "【注意】受阻：Need the DB password",
        started: "开始处理任务。",
        progress: "仍在运行：已用 0 分钟，已完成 1 次工具调用。",
        tool_error: "工具 explode 出错：disk full",
      },
    }[serverLanguage];
    for (const status of ["completed", "failed", "warning", "started", "progress", "tool_error"] as const) {
      const event = await stored(chat, status);
      const text = await direct(chat, event);
      assert.ok(text.includes(words[status]), `the ${status} line in the server's words:\n${text}`);
      // The agent's (here the tool's) own words are shown as they came.
      const agent = readSaid(event)?.agent ?? "";
      const shown = [...verbatim, agent, `${event.event_id}:direct`].filter(Boolean);
      assert.deepEqual(otherLanguage(text, serverLanguage, shown), [], `only ${serverLanguage} but the agent's words and names:\n${text}`);
    }

    // A said the server cannot check (an unknown key) words nothing: the summary as Pi sent it.
    const completed = await stored(chat, "completed");
    const forged = { ...completed, event_id: `${completed.event_id}:forged`, details: { ...completed.details, said: { key: "run_approved", params: {} } } };
    const text = await direct(chat, forged);
    assert.ok(text.includes(completed.summary), `the summary unchanged:\n${text}`);
  });
}
