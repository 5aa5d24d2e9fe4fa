/** The "needs you" notice for a dialog Pi waits on, as the person reads it in each language. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { needsYouNotice } from "../../extension/approvals/gate.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema.ts";
import { messagesFor, type Language } from "../../extension/messages.ts";
import type { NoticeContext } from "../../extension/notices/notice.ts";

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
    ["zh-CN", undefined, "项目 shop：需要你：Pi 正在等你在终端回答一个select对话框，回答之前 Agent 不会继续。"],
  ];
  for (const [language, title, summary] of rows) assert.equal(needsYouNotice("select", title, context(language)).summary, summary);
});
