/** The "needs you" notice for a dialog Pi waits on: as the person reads it in each language, and the way it leaves. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { setImmediate as nextTick } from "node:timers/promises";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import type { EventBody } from "../../protocol/events.ts";
import { ApprovalGate, needsYouNotice } from "../../extension/approvals/gate.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import { ControlDispatcher } from "../../extension/command-channel/control-channel.ts";
import type { Notifier, SendOptions } from "../../extension/notices/notifier.ts";
import { messagesFor, type Language } from "../../extension/texts/messages.ts";
import { createHandOver } from "../../extension/notices/hand-over.ts";
import type { NoticeContext } from "../../extension/notices/notice-rules.ts";

const context = (language: Language): NoticeContext => ({
  sessionId: "s-1",
  runtimeId: "r-1",
  source: "Pi Agent · shop",
  project: "shop",
  content: { ...DEFAULT_CONFIG.content, includeProject: true },
  contextUsage: null,
  now: new Date(0),
  text: messagesFor(language).notice,
});

test("the notice names the dialog, or its kind, in the session's language", () => {
  const rows: [Language, string | undefined, string][] = [
    [
      "en-US",
      "Deploy to production?",
      'Project shop: Needs you: Pi is waiting for your answer to "Deploy to production?" in the terminal; the agent will not go on until you answer.',
    ],
    [
      "en-US",
      undefined,
      "Project shop: Needs you: Pi is waiting for your answer to a select dialog in the terminal; the agent will not go on until you answer.",
    ],
    ["zh-CN", "部署到生产？", "项目 shop：需要你：Pi 正在等你在终端回答「部署到生产？」，回答之前 Agent 不会继续。"],
    ["zh-CN", undefined, "项目 shop：需要你：Pi 正在等你在终端回答一个选择对话框，回答之前 Agent 不会继续。"],
  ];
  for (const [language, title, summary] of rows) assert.equal(needsYouNotice("select", title, context(language)).summary, summary);
});

test("a 'needs you' notice takes the hand-over queue like every notice: handed to the notifier just after Pi's handler, as a non-final", async () => {
  const handlers = new Map<string, (event: unknown, ctx: unknown) => unknown>();
  const pi = { on: (name: string, handler: (event: unknown, ctx: unknown) => unknown) => handlers.set(name, handler), registerTool() {} };
  const sent: { event: EventBody; options: SendOptions }[] = [];
  const notifier = { send: (event: EventBody, options: SendOptions) => sent.push({ event, options }) } as unknown as Notifier;
  new ApprovalGate(pi as unknown as ExtensionAPI, {
    runtimeId: "r-1",
    report: () => {},
    handOver: createHandOver((error) => assert.fail(`no notice builder may throw: ${String(error)}`)),
    control: new ControlDispatcher(),
    text: () => messagesFor("zh-CN"),
    session: () => ({
      ctx: {} as ExtensionContext,
      sessionId: "s-1",
      config: DEFAULT_CONFIG,
      client: undefined,
      chat: true,
      subagent: false,
      notices: { notifier, context: () => context("zh-CN") },
    }),
  });
  await handlers.get("ui_prompt_start")!({ kind: "confirm", title: "部署到生产？" }, {});
  assert.equal(sent.length, 0, "nothing is validated or written on Pi's path");
  await nextTick();
  assert.equal(sent.length, 1);
  assert.deepEqual(sent[0]!.options, { final: false, throttled: false });
  assert.equal(sent[0]!.event.status, "warning");
  assert.match(sent[0]!.event.summary, /需要你.*「部署到生产？」/);
});
