/**
 * The stage the approval end-to-end tests share: a REAL Pi session (SDK + faux model) with the
 * extension, talking to the REAL notify-webhook plugin (loopback, SQLite) whose mock bot records
 * what it sends the owner.
 */
import type { TestContext } from "node:test";
import type {} from "@koishijs/plugin-mock";
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { ASK_TOOL_NAME } from "../../extension/approvals/gate.ts";
import { AuditPage } from "../../protocol/audit.ts";
import { RECIPIENT, piOnServer } from "../../harness/extension-env.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { ai, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";
import { OPERATOR_TOKEN, call } from "../../harness/agent-api.ts";
import { MockBot } from "../server/persona-standin.ts";
import { waitUntil } from "../../harness/wait.ts";

export interface Setup {
  koishi: KoishiHarness;
  pi: PiHarness;
  sessionId: string;
  /** What the bot sent the owner, in order. */
  owner: string[];
  build: string;
}

/** The session speaks `language` (Chinese unless asked, whatever the machine's locale). */
export async function setup(
  t: TestContext,
  options: { approval?: Record<string, unknown>; pi?: StartPiOptions; activate?: boolean; language?: string } = {},
): Promise<Setup> {
  const owner: string[] = [];
  const koishi = await startKoishi({
    config: { operatorToken: OPERATOR_TOKEN, botId: "mock:514", recipientId: RECIPIENT.qq, approvalOperatorDecisions: true },
    plugins: (use) => void use(MockBot, { selfId: "514" }),
  });
  const bot = koishi.app.bots["mock:514"]!;
  bot.sendPrivateMessage = async (userId, content) => {
    assert.equal(userId, RECIPIENT.qq, "approval messages go to the configured owner only");
    owner.push(String(content));
    return [`msg-${owner.length}`];
  };
  const pi = await piOnServer(t, koishi, {
    ...options.pi,
    userConfig: { language: options.language ?? "zh-CN", approval: { enabled: true, ...options.approval } },
  });
  if (options.activate !== false) await pi.prompt("/anon-notify");
  const build = join(pi.cwd, "build");
  mkdirSync(build, { recursive: true });
  return { koishi, pi, sessionId: pi.session.sessionManager.getSessionId(), owner, build };
}

export const rmBuild = () => ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: "rm -rf build" })], { stopReason: "toolUse" });
export const ask = (args: { action: string; reason: string; payload?: string }) =>
  ai.fauxAssistantMessage([ai.fauxToolCall(ASK_TOOL_NAME, args)], { stopReason: "toolUse" });

export async function approvals(koishi: KoishiHarness, sessionId: string): Promise<any[]> {
  const answer = await call(koishi, "GET", `/operator/approvals?state=all&session_id=${sessionId}`, undefined, OPERATOR_TOKEN);
  assert.equal(answer.status, 200);
  return answer.body.approvals;
}

export async function auditActions(koishi: KoishiHarness, sessionId: string): Promise<string[]> {
  const answer = await call(koishi, "GET", `/operator/audit?session_id=${sessionId}&limit=200`, undefined, OPERATOR_TOKEN);
  return AuditPage.parse(answer.body)
    .entries.map((e) => e.action)
    .reverse();
}

/** The owner writes in their private chat with the bot, as a person would; the bot's replies. */
export const ownerSays = (koishi: KoishiHarness, text: string): Promise<string[]> => koishi.app.mock.client(RECIPIENT.qq).receive(text);

/**
 * What the self-approval loop does: the operator token posted to the decision route. The opt-in is on
 * here, but this Pi runs as the server's own OS user (or root), so it could have read the token: refused.
 */
export async function operatorDecisionRefused(koishi: KoishiHarness, ref: string, body: Record<string, unknown> = { decision: "approved" }): Promise<void> {
  const answer = await call(koishi, "POST", `/operator/approvals/${ref}/decision`, body, OPERATOR_TOKEN);
  assert.deepEqual([answer.status, answer.body], [403, { error: "operator_token_reachable" }]);
}

/** The approval the server holds open for this session, once the extension's request arrived. */
export const pendingApproval = (koishi: KoishiHarness, sessionId: string) =>
  waitUntil(async () => (await approvals(koishi, sessionId)).find((a) => a.state === "pending"), "the approval is pending on the server");
