/**
 * An approval request reads in the server's language alone, whatever language Pi speaks: a REAL
 * Pi session (SDK, faux model) set to one language, the REAL notify-webhook plugin in Koishi set
 * to the other, plugin-mock chat for the owner. Each rule that has no command words of its own
 * (a disk device write, a write outside the project, a command nobody can see through) is raised
 * in turn and denied from the chat: the request, the reply to the denial and the closing message
 * hold no word of Pi's language, only the command verbatim and names.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { basename } from "node:path";
import { startChat } from "../../harness/chat.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { ai, answerableTerminal } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { otherLanguage, RULE_ONLY_CASES } from "../helpers/languages.ts";

for (const [piLanguage, serverLanguage] of [
  ["zh-CN", "en-US"],
  ["en-US", "zh-CN"],
] as const) {
  test(`a Pi in ${piLanguage} asks a server in ${serverLanguage}: each rule-only request, its denial and its closing read in ${serverLanguage} alone, the command verbatim`, {
    timeout: 180_000,
  }, async (t) => {
    const term = answerableTerminal();
    const chat = await startChat({ locales: [serverLanguage] });
    const pi = await piOnServer(t, chat, { ui: term.ui, userConfig: { language: piLanguage, approval: { enabled: true } } });
    await pi.prompt("/anon-notify");
    const project = basename(pi.cwd);
    const head = serverLanguage === "en-US" ? /\[Pi approval ([A-Z]{5})\]/ : /【Pi 审批 ([A-Z]{5})】/;
    for (const [i, sample] of RULE_ONLY_CASES.entries()) {
      pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command: sample.command })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("ok")]);
      const run = pi.prompt(`case ${i}`);
      const request = await waitUntil(() => chat.sent.filter((m) => head.test(m.text))[i], `the ${sample.rule} request reached the owner's chat`, 30_000);
      const code = head.exec(request.text)![1]!;
      assert.ok(request.text.split("\n").includes(`┃ ${sample.command}`), `the command verbatim on its own line:\n${request.text}`);
      assert.ok(request.text.includes(sample[serverLanguage]), `the action in the server's words:\n${request.text}`);
      assert.ok(request.text.includes(sample.rule), `the rule is named:\n${request.text}`);
      const [denied] = await chat.owner().receive(`anon.deny ${code}`);
      await run;
      const closing = await waitUntil(
        () => chat.sent.find((m) => m.text.includes(code) && m.id !== request.id && !head.test(m.text)),
        `the ${sample.rule} request's closing message`,
        30_000,
      );
      for (const text of [request.text, denied!, closing.text])
        assert.deepEqual(otherLanguage(text, serverLanguage, [code, project]), [], `only ${serverLanguage} but the command and names:\n${text}`);
      assert.ok(denied!.includes(sample[serverLanguage]) && closing.text.includes(sample[serverLanguage]), `${denied}\n${closing.text}`);
    }
  });
}
