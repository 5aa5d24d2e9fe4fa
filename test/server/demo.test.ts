/** `npm run demo` as a newcomer runs it, in either language: it ends with its closing line and sends nobody to ~/.pi. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";

const repo = resolve(import.meta.dirname, "../..");

const LANGUAGES = {
  "zh-CN": { env: "zh_CN.UTF-8", closing: "演示结束，临时目录已清理。", noPiDir: /不写 ~\/\.pi/, persona: "收到事件，将注入人格主对话" },
  "en-US": {
    env: "en_US.UTF-8",
    closing: "Demo finished; the temp folders are removed.",
    noPiDir: /writes nothing to ~\/\.pi/,
    persona: "Event received; it would be injected",
  },
} as const;

for (const [language, expected] of Object.entries(LANGUAGES)) {
  test(`npm run demo in ${language} prints nothing after its closing line and never asks for a real ~/.pi path`, { timeout: 120_000 }, async () => {
    const env = { ...process.env, LC_ALL: expected.env };
    const { stdout, stderr } = await promisify(execFile)(process.execPath, ["scripts/demo.ts"], { cwd: repo, env, maxBuffer: 16 * 1024 * 1024 });
    const output = stdout + stderr;
    assert.ok(stdout.trimEnd().endsWith(expected.closing), `the closing line is the last thing printed:\n${stdout.slice(-2000)}`);
    assert.ok(!output.includes(".pi/agent"), `no Pi agent folder is named:\n${output}`);
    assert.match(output, expected.noPiDir);
    // Every completion the demo causes (four runs, and the session started from chat) reaches the persona while its step is shown.
    assert.equal(output.split(expected.persona).length - 1, 5, output);
    const fromChat = output.slice(output.indexOf("━━ 8."), output.indexOf("━━ 9."));
    assert.equal(fromChat.split(expected.persona).length - 1, 1, `the session started with anon.new completes in its step:\n${fromChat}`);
    const lastStep = output.slice(output.indexOf("━━ 9."));
    assert.ok(!lastStep.includes(expected.persona), `no notice spills into the last step:\n${lastStep}`);
    if (language === "en-US") assert.equal(output.match(/\p{Script=Han}/u), null, `no Chinese anywhere in the English demo:\n${output}`);
  });
}
