/**
 * `/anon-notify-doctor` through Pi's own CLI against the real standalone server (`npm start`'s
 * Koishi app with the log persona, SQLite in a temp folder): what it reports, and the test notice
 * followed to its receipt.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { dataDirFor } from "../../extension/config/config.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { runStandalone } from "../../server/standalone.ts";
import { freePort } from "../../harness/koishi.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { REPO, describeRun, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";

const version = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;

test("through Pi's CLI, /anon-notify-doctor reports config sources, token, server, recipient, session and delivery, and `test` follows a notice to its receipt", { timeout: 120_000 }, async (t) => {
  const serverDir = mkdtempSync(join(tmpdir(), "anon-notify-doctor-"));
  const server = await runStandalone(
    { host: "127.0.0.1", port: await freePort(), dataDir: serverDir, configPath: join(serverDir, "server.json") },
    REPO,
    { announce: () => {} },
  );
  const { model, home } = await stubbedPiHome(t, async () => {
    await server.stop();
    rmSync(serverDir, { recursive: true, force: true });
  });
  const endpoint = `${server.baseUrl}/events`;
  configureExtension(home.root, endpoint);
  const dataDir = dataDirFor(home.agentDir);
  writeFileSync(join(dataDir, "token"), readFileSync(join(serverDir, "token")), { mode: 0o600 });
  const session = join(home.root, "session.jsonl");
  const pi = (args: string[], env: Record<string, string> = {}) => runPi(home, ["-e", REPO, "-p", "--session", session, ...args], { env });

  model.script({ text: "done" });
  assert.equal((await pi(["task zero"])).code, 0);
  const before = await pi(["/anon-notify-doctor"]);
  assert.equal(before.code, 0, describeRun(before));
  const userConfig = join(dataDir, "config.json");
  for (const line of [
    "Anon 通知诊断",
    `用户配置 ${userConfig}: 已读取`,
    `language = "zh-CN"  ← 环境变量 LANG=C.UTF-8`,
    `endpoint = "${endpoint}"  ← 用户配置 ${userConfig}`,
    `enabled = true  ← 默认值`,
    `令牌文件 ${join(dataDir, "token")}：存在`,
    "使用：令牌文件",
    `${endpoint} 可达：版本 ${version}，协议 events ${PROTOCOL_VERSIONS.events} / commands ${PROTOCOL_VERSIONS.commands}`,
    "状态：Anon 通知：未开启",
    "在线心跳：未运行",
    "outbox 待重发：0 条",
    "发送测试通知：/anon-notify-doctor test",
  ]) {
    assert.ok(before.stderr.includes(line), `doctor says ${JSON.stringify(line)}\n${describeRun(before)}`);
  }
  assert.match(before.stderr, /QQ —，Anon QQ —：unknown（not_configured）/, describeRun(before));
  assert.ok(!before.stderr.includes(readFileSync(join(serverDir, "token"), "utf8").trim()), "the token itself is never shown");

  const on = await pi(["/anon-notify"]);
  assert.equal(on.code, 0, describeRun(on));
  const run = await pi(["/anon-notify-doctor test"], { LANG: "en_US.UTF-8" });
  assert.equal(run.code, 0, describeRun(run));
  for (const line of ["Anon notices doctor", "state: Anon notices: on → QQ", "presence: running", "instruction channel: running", "receipt: context_injected"]) {
    assert.ok(run.stderr.includes(line), `doctor says ${JSON.stringify(line)}\n${describeRun(run)}`);
  }
  assert.match(run.stderr, /sent ext:[^:]+:doctor-/, describeRun(run));

  const usage = await pi(["/anon-notify-doctor now"]);
  assert.match(usage.stderr, /用法：\/anon-notify-doctor/, describeRun(usage));
});
