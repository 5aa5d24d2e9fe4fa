/** `npm run demo` as a newcomer runs it: it ends with its closing line and sends nobody to ~/.pi. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { resolve } from "node:path";
import { promisify } from "node:util";

const repo = resolve(import.meta.dirname, "../..");

test("npm run demo prints nothing after its closing line and never asks for a real ~/.pi path", { timeout: 120_000 }, async () => {
  const { stdout, stderr } = await promisify(execFile)(process.execPath, ["scripts/demo.ts"], { cwd: repo, maxBuffer: 16 * 1024 * 1024 });
  const output = stdout + stderr;
  assert.ok(stdout.trimEnd().endsWith("演示结束，临时目录已清理。"), `the closing line is the last thing printed:\n${stdout.slice(-2000)}`);
  assert.ok(!output.includes(".pi/agent"), `no Pi agent folder is named:\n${output}`);
  assert.match(output, /不写 ~\/\.pi/);
  // Every completion the demo causes (four runs) reaches the persona while its step is shown.
  assert.equal(output.split("收到事件，将注入人格主对话").length - 1, 4, output);
  const lastStep = output.slice(output.indexOf("━━ 8."));
  assert.ok(!lastStep.includes("收到事件"), `no notice spills into the last step:\n${lastStep}`);
});
