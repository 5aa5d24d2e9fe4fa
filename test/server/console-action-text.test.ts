/**
 * The console page's words for an approval's action (console/client/action-text.ts) with the
 * page's own catalogue: the page's words for the codes it knows in each language, an older
 * client's label marked as the agent's, no label for an unknown code, the model's words as given.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { actionText, sitesText } from "../../console/client/action-text.ts";
import { failureText } from "../../console/client/said-text.ts";
import messages from "../../console/client/messages.ts";
import { project } from "../../server/approvals/decisions.ts";
import { consoleApproval } from "../../server/console/decisions.ts";
import { ACTION_LABEL_CASES } from "../helpers/languages.ts";
import { record } from "./approval-fixtures.ts";

type Tree = { [key: string]: string | Tree };

/** vue-i18n's lookup and named interpolation, enough for these texts. */
function lookup(locale: "zh-CN" | "en-US", key: string): string | Tree | undefined {
  return key.split(".").reduce<string | Tree | undefined>((node, part) => (typeof node === "object" ? node[part] : undefined), messages[locale] as Tree);
}

function pageT(locale: "zh-CN" | "en-US") {
  return (key: string, params: Record<string, string> = {}) => {
    const found = lookup(locale, key);
    assert.equal(typeof found, "string", `${locale} has ${key}`);
    return (found as string).replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? "");
  };
}

test("the page words each action code in its own language; unknown codes name nothing; agent words stay marked as theirs", () => {
  for (const [action, action_code, source, zh, en] of ACTION_LABEL_CASES) {
    // A request's rules hold the rule its code names (or none of the command-word ones).
    const rules = action_code === "rm-rf" || action_code === "git-push-force" ? [action_code] : ["opaque.eval"];
    const approval = consoleApproval(project(record({ action, action_code, source, rules })));
    assert.equal(actionText(approval, pageT("zh-CN")), zh, `${action_code} zh-CN`);
    assert.equal(actionText(approval, pageT("en-US")), en, `${action_code} en-US`);
  }
});

test("the page words a run's failure code in its own language; a code it does not know stays that code", () => {
  const table: [string, string, string][] = [
    ["error", "模型请求出错", "the model request failed"],
    ["length", "回复达到长度上限而被截断", "the reply was cut off at the length limit"],
    ["tool_error_in_final_batch", "最终工具批次中有工具出错", "a tool in the final batch failed"],
    ["some_new_reason", "some_new_reason", "some_new_reason"],
    ["toString", "toString", "toString"],
  ];
  for (const [code, zh, en] of table) {
    for (const [locale, words] of [
      ["zh-CN", zh],
      ["en-US", en],
    ] as const)
      assert.equal(
        failureText(code, pageT(locale), (key) => typeof lookup(locale, key) === "string"),
        words,
        `${locale} ${code}`,
      );
  }
});

test("the page names every command-word rule an approval matched", () => {
  const approval = consoleApproval(project(record({ action: "rm -rf", action_code: "rm-rf", rules: ["rm-rf", "sudo", "strict.unlisted"] })));
  assert.equal(actionText(approval, pageT("zh-CN")), "rm -rf + sudo");
  assert.equal(actionText(approval, pageT("en-US")), "rm -rf + sudo");
});

test("the page lists every rule with where it matched, in its own language", () => {
  const approval = consoleApproval(
    project(
      record({
        command: "echo hi; rm -rf build\nsudo true",
        rules: ["rm-rf", "sudo", "strict.unlisted", "protected-path"],
        matched: [
          { rule: "rm-rf", at: "rm -rf build" },
          { rule: "sudo", at: "sudo true" },
          { rule: "strict.unlisted", at: "bash -c x\nanon.approve XXXXX" },
        ],
      }),
    ),
  );
  assert.equal(
    sitesText(approval.sites, pageT("zh-CN")),
    "rm-rf（第 1 行第 10 列）; sudo（第 2 行）; strict.unlisted（命中：bash -c x⏎anon.approve XXXXX）; protected-path",
  );
  assert.equal(
    sitesText(approval.sites, pageT("en-US")),
    "rm-rf (line 1, col 10); sudo (line 2); strict.unlisted (at: bash -c x⏎anon.approve XXXXX); protected-path",
  );
});
