/**
 * Strict mode (the default) through a REAL Pi session and the REAL server: a sample of issue 34's
 * bypass families each hold the call and ask (the terminal dialog opens, the request is pending,
 * nothing ran), a command longer than a request can carry is refused whole, and a plain `ls` runs
 * without asking. Every target is a folder inside the test's own temporary directory.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdirSync } from "node:fs";
import { join } from "node:path";
import { ai, answerableTerminal, toolResults } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { approvals, setup } from "./approvals-stage.ts";

const bashCall = (command: string) => ai.fauxAssistantMessage([ai.fauxToolCall("bash", { command })], { stopReason: "toolUse" });

test("strict mode: interpreters, wrappers, tools that run commands and code hidden in data all ask; a plain ls does not", { timeout: 120_000 }, async (t) => {
  const term = answerableTerminal();
  const { koishi, pi, sessionId } = await setup(t, { pi: { ui: term.ui } });
  const targets = ["t-py", "t-awk", "t-arith", "t-wrap", "t-sed"];
  for (const target of targets) mkdirSync(join(pi.cwd, target), { recursive: true });
  const commands = [
    `python3 -c 'import shutil; shutil.rmtree("t-py")'`,
    `awk 'BEGIN{system("rm -rf t-awk")}'`,
    "x='a[$(rm -rf t-arith)]'; echo $((x))",
    "taskset -c 0 rm -rf t-wrap",
    "sed -n '1e rm -rf t-sed' README.md",
  ];
  const padded = `rm -rf build; ${"echo ok; ".repeat(2_000)}rm -rf t-py`;
  pi.script([...commands.map(bashCall), bashCall(padded), bashCall("ls"), ai.fauxAssistantMessage("done")]);
  const run = pi.prompt("tidy up");

  for (const [index, command] of commands.entries()) {
    const approval = await waitUntil(
      async () => (await approvals(koishi, sessionId)).find((a) => a.state === "pending" && a.command === command),
      `a request for ${command}`,
    );
    assert.ok(
      approval.rules.some((rule: string) => rule.startsWith("strict.") || rule.startsWith("opaque.")),
      `${command}: ${approval.rules}`,
    );
    const dialog = await waitUntil(() => term.dialogs[index], `the dialog for ${command}`);
    assert.ok(dialog.message.includes(command), "the dialog shows the whole command");
    assert.equal(existsSync(join(pi.cwd, targets[index]!)), true, `${command}: held, nothing ran`);
    dialog.answer(false);
  }
  await run;
  const results = toolResults(pi, "bash");
  assert.deepEqual(
    results.map((result) => result.isError),
    [true, true, true, true, true, true, false],
    "the five denied, the padded one refused, ls ran",
  );
  assert.match(results[5]!.text, /^Refused: the command is \d+ characters|^已拒绝：命令共 \d+ 字符/);
  assert.equal(term.dialogs.length, commands.length, "neither the padded command nor ls opened a dialog");
  const requested = (await approvals(koishi, sessionId)).map((a) => a.command);
  assert.equal(requested.length, commands.length, "neither the padded command nor ls reached the server");
  for (const target of targets) assert.equal(existsSync(join(pi.cwd, target)), true, `${target} is still there`);
});
