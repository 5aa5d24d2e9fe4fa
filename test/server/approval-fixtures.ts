/**
 * What the approval tests share: a stored approval as the decisions see it, the server's texts in
 * one language (the real locale files, Koishi's own interpolation, as `ctx.i18n` renders them),
 * and a real Koishi app with a mock bot whose sends to the owner are recorded.
 */
import assert from "node:assert/strict";
import type { Context, Plugin } from "koishi";
import { OPERATOR_TOKEN, call, heartbeatOf } from "../../harness/agent-api.ts";
import { startKoishi } from "../../harness/koishi.ts";
import type { ApprovalRecord } from "../../server/approvals/decisions.ts";
import { voiceOf, type Voice } from "../../server/approvals/message-rules.ts";
import type { Locale } from "../../server/locales/load.ts";
import { sayIn } from "./say.ts";
import { MockBot } from "./persona-standin.ts";
import { StandInToolService } from "./yesimbot-tool-standin.ts";

export const OWNER = "10001";
export const NOW = new Date("2026-11-30T03:00:00.000Z");
export const binding = { tool_call_id: "call-1", args_digest: "a".repeat(64), cwd: "/home/u/proj" };

export function record(overrides: Partial<ApprovalRecord> = {}): ApprovalRecord {
  return {
    seq: 1,
    approval_id: "ap-1",
    code: "ACDEF",
    session_id: "s-1",
    runtime_id: "r-1",
    run_id: "r-1.run.1",
    ...binding,
    tool: "bash",
    action: "rm -rf",
    action_code: "rm-rf",
    reason: "规则 rm-rf",
    command: "rm -rf build",
    command_hidden_chars: 0,
    argv: [["rm", "-rf", "build"]],
    agent_uid: null,
    rules: ["rm-rf"],
    matched: null,
    grantable: false,
    preview: "rm -rf build",
    source: "policy",
    request_digest: "d",
    state: "pending",
    decision: null,
    decision_reason: null,
    decided_by: null,
    via: null,
    outcome_reason: null,
    created_at: NOW,
    expires_at: new Date(NOW.getTime() + 600_000),
    decided_at: null,
    resolved_at: null,
    request_message_id: null,
    request_sent: false,
    request_held: false,
    persona_mentioned: false,
    closing_sent: false,
    grant_id: null,
    grant_use: null,
    ...overrides,
  };
}

export function voice(locale: Locale): Voice {
  return voiceOf(sayIn(locale));
}

/** A real Koishi app with the operator API, a mock bot recording what the owner gets, and session s-1 (runtime r-1) online. */
export async function server(t: { after(fn: () => Promise<void>): void }, options: { yesImBot?: boolean } = {}) {
  const owner: string[] = [];
  let failSends = 0;
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, botId: "mock:514", recipientId: OWNER, approvalOperatorDecisions: true },
    plugins: (use) => {
      use(MockBot, { selfId: "514" });
      if (options.yesImBot) use(StandInToolService as unknown as Plugin<Context>);
    },
  });
  koishi.app.bots["mock:514"]!.sendPrivateMessage = async (userId, content) => {
    assert.equal(userId, OWNER);
    if (failSends > 0) {
      failSends--;
      throw new Error("platform down");
    }
    owner.push(String(content));
    return [`msg-${owner.length}`];
  };
  t.after(() => koishi.stop());
  // Approvals come only from a session's live runtime.
  assert.equal((await call(koishi, "POST", "/sessions/heartbeat", heartbeatOf())).status, 200);
  return { koishi, owner, failNextSends: (n: number) => (failSends = n) };
}
