/**
 * The console page's words for an approval's action (console/client/action-text.ts) with the
 * page's own catalogue: the page's words for the codes it knows in each language, an older
 * client's label marked as the agent's, no label for an unknown code, the model's words as given.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { actionText } from "../../console/client/action-text.ts";
import messages from "../../console/client/messages.ts";

type Tree = { [key: string]: string | Tree };

/** vue-i18n's lookup and named interpolation, enough for these texts. */
function pageT(locale: "zh-CN" | "en-US") {
  return (key: string, params: Record<string, string> = {}) => {
    const found = key
      .split(".")
      .reduce<string | Tree | undefined>((node, part) => (typeof node === "object" ? node[part] : undefined), messages[locale] as Tree);
    assert.equal(typeof found, "string", `${locale} has ${key}`);
    return (found as string).replace(/\{(\w+)\}/g, (_, name: string) => params[name] ?? "");
  };
}

test("the page words each action code in its own language; unknown codes name nothing; agent words stay marked as theirs", () => {
  const table: [string, string | null, "policy" | "ask_approval", string, string][] = [
    ["写磁盘设备", "disk-write", "policy", "写磁盘设备", "write to a disk device"],
    ["write outside the project", "write-outside-project", "policy", "写入项目外", "write outside the project"],
    ["看不清将运行什么", "opaque", "policy", "看不清将运行什么", "cannot see what will run"],
    ["x", "git-push-force", "policy", "git push --force", "git push --force"],
    ["deploy", "rule", "policy", "你的规则「deploy」", "your rule “deploy”"],
    ["写磁盘设备", null, "policy", "Agent 自己的说法「写磁盘设备」", "in the agent's own words: “写磁盘设备”"],
    ["ls", "toString", "policy", "一项需要批准的操作", "an action that needs approval"],
    ["ls", "approvalWants", "policy", "一项需要批准的操作", "an action that needs approval"],
    ["deploy", "disk-write", "ask_approval", "deploy", "deploy"],
  ];
  for (const [action, action_code, source, zh, en] of table) {
    assert.equal(actionText({ action, action_code, source }, pageT("zh-CN")), zh, `${action_code} zh-CN`);
    assert.equal(actionText({ action, action_code, source }, pageT("en-US")), en, `${action_code} en-US`);
  }
});
