/**
 * What the owner reads of an approval: the command verbatim on lines nothing the agent wrote can
 * start, the real time left, one language per text (the real locale files).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { project } from "../../server/approvals/decisions.ts";
import { closingText, requestText, wholeCommandTexts } from "../../server/approvals/message-rules.ts";
import { consoleApproval } from "../../server/console/decisions.ts";
import { ACTION_LABEL_CASES } from "../helpers/languages.ts";
import { NOW, record, voice } from "./approval-fixtures.ts";

test("the request says the real time left, as the locale writes it, in one language", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const table: [number, string, string][] = [
    [2_500, "请在 2秒钟内回答，否则按拒绝处理。", "Answer within 2 seconds, or it counts as denied."],
    [600_000, "请在 10分钟内回答，否则按拒绝处理。", "Answer within 10 minutes, or it counts as denied."],
    [-5_000, "请在 1秒钟内回答，否则按拒绝处理。", "Answer within 1 second, or it counts as denied."],
    [3 * 3_600_000 + 5 * 60_000, "请在 3小时 5分钟内回答，否则按拒绝处理。", "Answer within 3 hours 5 minutes, or it counts as denied."],
  ];
  for (const [leftMs, zhLine, enLine] of table) {
    const row = record({ expires_at: new Date(NOW.getTime() + leftMs) });
    assert.ok(requestText(row, NOW, zh).split("\n").includes(zhLine), `${leftMs} ms: ${requestText(row, NOW, zh)}`);
    assert.ok(requestText(row, NOW, en).split("\n").includes(enLine), `${leftMs} ms: ${requestText(row, NOW, en)}`);
  }
  const english = requestText(record({ rules: ["git-push-force"], reason: "rule git-push-force" }), NOW, en);
  assert.doesNotMatch(english, /[\u3000-\u9fff\uff00-\uffef]/, "no Chinese in the English request");
  const chinese = requestText(record({ rules: ["git-push-force"], reason: "rule git-push-force" }), NOW, zh);
  assert.doesNotMatch(chinese, /reply|approval|rule /i, "no English words in the Chinese request beyond names and codes");
  assert.match(chinese, /^规则：git-push-force$/m);
});

test("the request is the command, verbatim, on lines nothing the agent wrote can start", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const forged = "ls\n批准：anon.approve XXXXX\n\n\n\u202egit push --force\tx\x0b";
  for (const [name, v] of [
    ["zh", zh],
    ["en", en],
  ] as const) {
    const text = requestText(record({ command: forged, action: "ok\nanon.approve YYYYY", reason: "x\n批准", source: "ask_approval" }), NOW, v);
    const lines = text.split("\n");
    assert.ok(
      lines.some((line) => line.includes("ls⏎批准：anon.approve XXXXX⏎⏎⏎\\u202egit push --force\\tx\\x0b")),
      `${name}: the command in full, one line, controls visible:\n${text}`,
    );
    const answering = lines.filter((line) => /^(批准|拒绝|Approve|Deny|anon\.)/.test(line));
    assert.equal(answering.length, 2, `${name}: only the server's own two answer lines:\n${text}`);
    assert.ok(
      answering.every((line) => line.includes("ACDEF") && !line.includes("XXXXX")),
      name,
    );
    assert.ok(
      lines.every((line) => !/^(ls|git|ok|x)\b/.test(line)),
      `${name}: no line starts with agent text`,
    );
  }

  assert.deepEqual(
    consoleApproval(project(record({ command: forged }))).command_lines,
    ["ls⏎", "批准：anon.approve XXXXX⏎", "⏎", "⏎", "\\u202egit push --force\\tx\\x0b"],
    "the console: a line per line, controls visible",
  );

  const long = `echo ${"a".repeat(5000)}; rm -rf ~`;
  const cut = requestText(record({ command: long }), NOW, zh);
  assert.match(cut, /┃ echo a+ ⟦…\d+…⟧ a+; rm -rf ~$/m, "head and tail, the tail's rm in sight");
  const hidden = Number(/^⚠ 太长，中间有 (\d+) 个字符没有显示，其中可能还有别的命令。回答前先看完整内容：anon\.approval ACDEF$/m.exec(cut)?.[1]);
  assert.ok(hidden > 4000 && hidden < long.length, cut);
  assert.match(requestText(record({ command: "rm -rf ~", command_hidden_chars: 1234 }), NOW, en), /Pi left out 1234 of its characters/);
  assert.match(
    requestText(record({ command: long }), NOW, en),
    /^⚠ Too long: \d+ characters in the middle are not shown, and they may run other commands\. Read all of it before you answer: anon\.approval ACDEF$/m,
  );

  const parts = wholeCommandTexts(record({ command: `${"x".repeat(4000)}\n批准：anon.approve XXXXX\ntail`, code: "ACDEF" }), zh);
  assert.ok(parts.length >= 3, "split across messages");
  assert.match(parts[0]!, /^【Pi 审批 ACDEF 的完整内容 1\/\d】/);
  for (const part of parts) {
    assert.ok(part.length <= 1500 + 80, "each message is bounded");
    assert.ok(
      part
        .split("\n")
        .slice(1)
        .every((line) => /^[┃┆] /.test(line) || /^规则：rm-rf$/.test(line)),
      "every command line behind the bar; the last part ends with the rules, in the server's words",
    );
  }
  assert.equal(
    parts
      .join("\n")
      .replace(/^【.*\n?/gm, "")
      .replace(/\n规则：.*$/, "")
      .split("\n")
      .map((line) => line.slice(2))
      .join(""),
    `${"x".repeat(4000)}⏎批准：anon.approve XXXXX⏎tail`,
    "all of it, in order",
  );
});

test("a grant's use is named in the closing message, its ordinal as the locale writes it", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  const used = (n: number) => record({ state: "approved", via: "chat", grant_id: "GKXMT", grant_use: n });
  assert.equal(closingText(used(3), zh), "【Pi 审批 ACDEF 已结束】rm -rf：已按授权 GKXMT 批准（第 3 次使用），命令已放行。");
  assert.deepEqual(
    [1, 2, 3, 4, 11, 22].map((n) => /\((\d+\w+) use\)/.exec(closingText(used(n), en))?.[1]),
    ["1st", "2nd", "3rd", "4th", "11th", "22nd"],
  );
  assert.equal(closingText(used(1), en), "[Pi approval ACDEF ended] rm -rf: approved by grant GKXMT (1st use); the command was let through.");
});

test("the action is the server's words for a code it knows; an older client's label is marked as the agent's; an unknown code shows no label; ask_approval is the model's words whatever code came", () => {
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  for (const [action, code, source, zhAction, enAction] of ACTION_LABEL_CASES) {
    const row = record({
      action,
      action_code: code,
      source,
      command: "rm -rf ~",
      rules: [source === "ask_approval" ? "model.ask" : code === "git-push-force" ? code : "rm-rf"],
    });
    for (const [v, line, words] of [
      [zh, source === "policy" ? `Agent 想执行 bash（${zhAction}）` : `Agent 请求批准：${zhAction}`, zhAction],
      [en, source === "policy" ? `The agent wants to run bash (${enAction})` : `The agent asks for approval: ${enAction}`, enAction],
    ] as const) {
      const text = requestText(row, NOW, v);
      assert.ok(text.includes(line), `${code}: ${line}\n${text}`);
      assert.ok(text.split("\n").includes("┃ rm -rf ~"), `${code}: the command verbatim, always\n${text}`);
      assert.ok(closingText({ ...row, state: "rejected", via: "chat" }, v).includes(words), `${code}: the closing names it the same way`);
    }
  }
});

test("every command-word rule a request matched is in its action, in the request and the closing message of either language", () => {
  const row = record({ action: "rm -rf", action_code: "rm-rf", command: "rm -rf build\nsudo true", rules: ["rm-rf", "sudo", "strict.unlisted"] });
  const [zh, en] = [voice("zh-CN"), voice("en-US")];
  assert.ok(requestText(row, NOW, zh).includes("Agent 想执行 bash（rm -rf + sudo）"), requestText(row, NOW, zh));
  assert.ok(requestText(row, NOW, en).includes("The agent wants to run bash (rm -rf + sudo)"), requestText(row, NOW, en));
  assert.match(closingText({ ...row, state: "rejected", via: "chat" }, zh), /rm -rf \+ sudo/);
  assert.match(closingText({ ...row, state: "rejected", via: "chat" }, en), /rm -rf \+ sudo/);
});

test("every rule is listed with where it matched, in the request and in anon.approval, in either language", () => {
  const row = record({
    command: "echo hi; rm -rf build\nsudo true",
    rules: ["rm-rf", "sudo", "strict.unlisted", "protected-path"],
    matched: [
      { rule: "rm-rf", at: "rm -rf build" },
      { rule: "sudo", at: "sudo true" },
      { rule: "strict.unlisted", at: "bash -c x" },
    ],
  });
  const zhRules = "规则：rm-rf（第 1 行第 10 列）; sudo（第 2 行）; strict.unlisted（命中：bash -c x）; protected-path";
  const enRules = "Rules: rm-rf (line 1, col 10); sudo (line 2); strict.unlisted (at: bash -c x); protected-path";
  for (const [v, line] of [
    [voice("zh-CN"), zhRules],
    [voice("en-US"), enRules],
  ] as const) {
    assert.ok(requestText(row, NOW, v).split("\n").includes(line), requestText(row, NOW, v));
    assert.ok(wholeCommandTexts(row, v).at(-1)!.split("\n").includes(line), wholeCommandTexts(row, v).join("\n"));
  }
});
