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
import { runStandalone } from "../../server/standalone/start.ts";
import { freePort } from "../../harness/koishi.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { REPO, describeRun, runPi, stubbedPiHome } from "../helpers/pi-cli.ts";

const version = (JSON.parse(readFileSync(join(REPO, "package.json"), "utf8")) as { version: string }).version;

test("through Pi's CLI, /anon-notify-doctor reports config sources, token, server, recipient, session and delivery, and `test` follows a notice to its receipt", {
  timeout: 120_000,
}, async (t) => {
  const serverDir = mkdtempSync(join(tmpdir(), "anon-notify-doctor-"));
  const server = await runStandalone({ host: "127.0.0.1", port: await freePort(), dataDir: serverDir, configPath: join(serverDir, "server.json") }, REPO, {
    announce: () => {},
  });
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
    // The standalone server prints notices with its log persona and has no chat.
    "通知去向：只打印在服务端终端（日志人格，不告诉任何人）",
    "聊天：没有（这个服务端不能私聊任何人）",
  ]) {
    assert.ok(before.stderr.includes(line), `doctor says ${JSON.stringify(line)}\n${describeRun(before)}`);
  }
  assert.ok(before.stderr.includes("QQ —，Anon QQ —：unknown，服务端没有配置要通知的 QQ（not_configured）"), describeRun(before));
  assert.ok(!before.stderr.includes(readFileSync(join(serverDir, "token"), "utf8").trim()), "the token itself is never shown");

  const on = await pi(["/anon-notify"]);
  assert.equal(on.code, 0, describeRun(on));
  // The trial path: said where notices go, no warning about a private chat that cannot exist here.
  const zh = messagesFor("zh-CN");
  for (const text of [zh.toggle.route.log, zh.toggle.noChat]) {
    assert.ok(on.stderr.includes(text), `${text}\n${describeRun(on)}`);
  }
  assert.ok(!on.stderr.includes("私聊可达"), describeRun(on));
  const run = await pi(["/anon-notify-doctor test"], { LANG: "en_US.UTF-8" });
  assert.equal(run.code, 0, describeRun(run));
  for (const line of [
    "Anon notices doctor",
    "state: Anon notices: on → QQ",
    "presence: running",
    "instruction channel: running",
    "receipt: context_injected",
  ]) {
    assert.ok(run.stderr.includes(line), `doctor says ${JSON.stringify(line)}\n${describeRun(run)}`);
  }
  assert.match(run.stderr, /sent ext:[^:]+:doctor-/, describeRun(run));

  const usage = await pi(["/anon-notify-doctor now"]);
  assert.match(usage.stderr, /用法：\/anon-notify-doctor/, describeRun(usage));

  // The token file deleted: the real cause is named (no token here), not a refused token or an unreachable server.
  rmSync(join(dataDir, "token"));
  const noToken = await pi(["/anon-notify-doctor"], { LANG: "en_US.UTF-8" });
  assert.ok(noToken.stderr.includes(`${endpoint} answered, but there is no token here (HTTP 401)`), describeRun(noToken));
  assert.ok(!noToken.stderr.includes("unreachable"), describeRun(noToken));
  model.script({ text: "done" });
  const reload = await pi(["task after the token went"], { LANG: "en_US.UTF-8" });
  assert.ok(reload.stderr.includes(messagesFor("en-US").link.noToken(join(dataDir, "token"))), describeRun(reload));
  assert.ok(!reload.stderr.includes("rejected the token"), describeRun(reload));
});
