/**
 * A REAL Pi session whose notices outrun the REAL plugin's per-session event limit (1 a second, burst 1): Pi says once
 * (per episode: delivery.test.ts), in the session's language, that the server is pacing them; no per-notice warning, and the final arrives.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { PROGRESS_TOOL_NAME } from "../../extension/notices/progress-tool.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { AuditPage } from "../../protocol/audit.ts";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { ai } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";

/** One report each, none a progress right after a progress (the tool refuses those as duplicates). */
const STAGES = ["started", "progress", "done", "progress"] as const;

async function accepted(koishi: KoishiHarness, sessionId: string, status: string): Promise<number> {
  const answer = await call(koishi, "GET", `/operator/audit?session_id=${sessionId}&kind=event&limit=200`, undefined, OPERATOR_TOKEN);
  return AuditPage.parse(answer.body).entries.filter(
    (entry) => entry.action === "event.accepted" && (entry.data.event as { status?: string }).status === status,
  ).length;
}

for (const language of ["zh-CN", "en-US"] as const) {
  test(`(${language}) a session over the server's event limit is told once per episode that its notices are paced; its final arrives`, {
    timeout: 120_000,
  }, async (t) => {
    const words = messagesFor(language).delivery;
    const koishi = await startKoishi({ config: { operatorToken: OPERATOR_TOKEN, logPersona: true, eventsPerMinute: 60, eventBurst: 1 } });
    const pi = await piOnServer(t, koishi, { userConfig: { language, progressTool: { enabled: true } } });
    const sessionId = pi.session.sessionManager.getSessionId();
    await pi.prompt("/anon-notify");
    const run = async (round: number) => {
      // Every report in one turn: they reach the notifier together, faster than one a second.
      const reports = STAGES.map((stage, i) => ai.fauxToolCall(PROGRESS_TOOL_NAME, { stage, summary: `round ${round}, step ${i}` }));
      pi.script([ai.fauxAssistantMessage(reports, { stopReason: "toolUse" }), ai.fauxAssistantMessage(`round ${round} done`)]);
      await pi.prompt(`round ${round}`);
      await waitUntil(
        async () => ((await accepted(koishi, sessionId, "completed")) >= round ? true : undefined),
        () => `round ${round}'s final accepted; Pi said: ${pi.notices().join("\n")}`,
        60_000,
      );
    };

    // Five notices at once against one a second: refused with 429 four times over, in one episode.
    await run(1);
    assert.equal(pi.notices().filter((notice) => notice === words.paced).length, 1, `told once:\n${pi.notices().join("\n")}`);
    assert.deepEqual(
      pi.notices().filter((notice) => /429|rate_limited/.test(notice) && notice !== words.paced),
      [],
      "no warning per notice",
    );
  });
}
