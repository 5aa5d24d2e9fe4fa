/** `npm start`'s standalone server: flags, the token file, the printed setup, and a clean Ctrl-C. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { execFile, spawn } from "node:child_process";
import { mkdtemp, readdir, rm, stat, readFile, writeFile } from "node:fs/promises";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { promisify } from "node:util";
import { ensureToken, parseFlags, readStandaloneFile } from "../../server/standalone/start.ts";
import { DEFAULT_PORT, TRIAL_QQ, piInstructions, usage } from "../../server/standalone/texts.ts";
import { freePort } from "../../harness/koishi.ts";
import { validEvent } from "../../harness/event-client.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";

const repo = resolve(import.meta.dirname, "../..");
const standalone = join(repo, "server/standalone/start.ts");
const run = promisify(execFile);

async function tempDir(t: { after(fn: () => Promise<void>): void }): Promise<string> {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-standalone-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  return dir;
}

describe("standalone pieces", () => {
  const flagRows: [string, string[], Partial<ReturnType<typeof parseFlags>>][] = [
    ["defaults", [], { host: "127.0.0.1", port: DEFAULT_PORT, dataDir: "/srv/data", configPath: "/srv/data/server.json" }],
    [
      "all flags",
      ["--host", "0.0.0.0", "--port", "6000", "--data-dir", "state", "--config", "bot.json"],
      { host: "0.0.0.0", port: 6000, dataDir: "/srv/state", configPath: "/srv/bot.json" },
    ],
  ];
  for (const [label, argv, expected] of flagRows) {
    test(`flags: ${label}`, () => assert.deepEqual(parseFlags(argv, "/srv"), expected));
  }
  for (const argv of [["--help"], ["-h"], ["--port", "6000", "--help"]]) {
    test(`flags: ${argv.join(" ")} asks for usage`, () => assert.equal(parseFlags(argv, "/srv"), "help"));
  }
  for (const argv of [["--port", "0"], ["--port", "70000"], ["--port", "x"], ["--nope"]]) {
    test(`flags: ${argv.join(" ")} is refused`, () => assert.throws(() => parseFlags(argv, "/srv")));
  }

  test("the token file is created once with mode 0600 and never overwritten", async (t) => {
    const dir = await tempDir(t);
    const path = join(dir, "token");
    const first = ensureToken(path);
    assert.match(first, /^[0-9a-f]{64}$/);
    assert.equal((await stat(path)).mode & 0o777, 0o600);
    assert.equal(ensureToken(path), first);
    const own = `my-own-token-${"x".repeat(32)}`;
    await writeFile(path, `${own}\n`);
    assert.equal(ensureToken(path), own);
    assert.equal(await readFile(path, "utf8"), `${own}\n`);
    await writeFile(path, "  \n");
    assert.throws(() => ensureToken(path), /为空/);
  });

  test("the config file is optional, strict, and names what is wrong", async (t) => {
    const dir = await tempDir(t);
    assert.deepEqual(readStandaloneFile(join(dir, "missing.json")), { botId: "", recipientId: "", operatorToken: "", plugins: {}, notifyWebhook: {} });
    await writeFile(join(dir, "english.json"), JSON.stringify({ language: "en-US" }));
    assert.equal(readStandaloneFile(join(dir, "english.json")).language, "en-US");
    await writeFile(join(dir, "klingon.json"), JSON.stringify({ language: "tlh" }));
    assert.throws(() => readStandaloneFile(join(dir, "klingon.json"), "en-US"), /^Error: The config file .*klingon\.json is invalid: language/);
    await writeFile(join(dir, "bad.json"), JSON.stringify({ botId: 5, qq: "1" }));
    assert.throws(() => readStandaloneFile(join(dir, "bad.json")), /botId.*|qq/);
  });
});

/** The environment of a newcomer whose locale asks for `language`. */
function localeEnv(language: "zh-CN" | "en-US"): NodeJS.ProcessEnv {
  return { ...process.env, LC_ALL: language === "en-US" ? "en_US.UTF-8" : "zh_CN.UTF-8" };
}
const HAN = /\p{Script=Han}/u;

for (const language of ["zh-CN", "en-US"] as const) {
  test(`npm start -- --help prints the usage of every flag in ${language} only and exits 0 without starting a server`, async (t) => {
    const dir = await tempDir(t);
    const { stdout, stderr } = await run("npm", ["start", "--silent", "--", "--help", "--data-dir", dir], { cwd: repo, env: localeEnv(language) });
    assert.equal(stderr, "");
    // The page build before it (npm's prestart) may speak first on a clone whose page is stale.
    assert.ok(stdout.trim().endsWith(usage(language)), stdout);
    for (const flag of ["--host", "--port", "--data-dir", "--config", "--help"]) assert.ok(stdout.includes(flag), `usage names ${flag}`);
    if (language === "en-US") assert.equal(stdout.match(HAN), null, `no Chinese in the English usage:\n${stdout}`);
    else assert.doesNotMatch(stdout, /Usage|default|options|address/, "no English words in the Chinese usage");
    assert.deepEqual(await readdir(dir), [], "nothing was written to the data folder");
  });
}

test("npm start with an unknown option prints the usage and exits 2", async () => {
  const failure = await run("npm", ["start", "--silent", "--", "--nope"], { cwd: repo, env: localeEnv("zh-CN") }).then(
    () => assert.fail("npm start -- --nope succeeded"),
    (error: { code?: number; stderr?: string }) => error,
  );
  assert.equal(failure.code, 2);
  assert.match(failure.stderr ?? "", /^参数错误：.*--nope/);
  assert.ok(failure.stderr?.includes(usage("zh-CN")));
});

test("npm start serves events, prints the bound URL and Pi setup, moves off a busy port and stops cleanly on Ctrl-C", async (t) => {
  const dir = await tempDir(t);
  const wanted = await freePort();
  // Hold the wanted port so the server has to move, as Koishi's maxPort allows.
  const blocker = createServer();
  await new Promise<void>((resolveListen) => blocker.listen(wanted, "127.0.0.1", resolveListen));
  t.after(() => new Promise<void>((resolveClose) => blocker.close(() => resolveClose())));
  await writeFile(join(dir, "server.json"), JSON.stringify({ botId: "onebot:20002", recipientId: "10001" }));

  const child = spawn(process.execPath, [standalone, "--port", String(wanted), "--data-dir", dir], {
    stdio: ["ignore", "pipe", "pipe"],
    env: localeEnv("zh-CN"),
  });
  let output = "";
  child.stdout.on("data", (chunk) => (output += chunk));
  child.stderr.on("data", (chunk) => (output += chunk));
  const exited = new Promise<number | null>((resolveExit) => child.once("exit", (code) => resolveExit(code)));
  t.after(async () => {
    if (child.exitCode === null) child.kill("SIGKILL");
    await exited;
  });

  const baseUrl = await waitUntil(() => /接口地址：(http:\/\/\S+)/.exec(output)?.[1], `bound URL in output: ${output}`, 30_000);
  assert.notEqual(new URL(baseUrl).port, String(wanted), "moved off the busy port");
  const tokenPath = join(dir, "token");
  assert.ok(output.includes(`Token 文件：${tokenPath}`));
  assert.ok(output.includes(`"endpoint": "${baseUrl}/events"`));
  assert.ok(output.includes('"qq": "10001"') && output.includes('"anonQq": "20002"'));
  assert.equal((await stat(tokenPath)).mode & 0o777, 0o600);
  const token = (await readFile(tokenPath, "utf8")).trim();

  const operatorTokenPath = join(dir, "operator.token");
  // Printed right after the Pi setup, possibly in a later chunk of output.
  await waitUntil(() => (output.includes(`Token 文件：${operatorTokenPath}`) ? true : undefined), "the operator token path in output");
  assert.equal((await stat(operatorTokenPath)).mode & 0o777, 0o600);
  const operatorToken = (await readFile(operatorTokenPath, "utf8")).trim();
  assert.notEqual(operatorToken, token);
  const sessions = await fetch(`${baseUrl}/operator/sessions`, { headers: { authorization: `Bearer ${operatorToken}` } });
  assert.deepEqual([sessions.status, await sessions.json()], [200, { sessions: [], next_cursor: null }]);

  const event = validEvent();
  const response = await fetch(`${baseUrl}/events`, { method: "POST", headers: { authorization: `Bearer ${token}` }, body: JSON.stringify(event) });
  assert.equal(response.status, 202);
  await response.arrayBuffer();
  await waitUntil(() => (output.includes(`"event_id": "${String(event.event_id)}"`) ? true : undefined), "the log persona printed the block");

  child.kill("SIGINT");
  assert.equal(await exited, 0);
  assert.match(output, /已停止。/);
});

describe("the start-up text for the log persona on purpose", () => {
  const bare = { botId: "", recipientId: "", operatorToken: "", plugins: {}, notifyWebhook: {} };
  const url = "http://127.0.0.1:5140/api/agent-notify/v1";
  test("without a bot it says what works now and what needs configuring, and for what, in no error tone", () => {
    const text = piInstructions(url, "/d/token", "/d/server.json", bare, "zh-CN");
    assert.match(text, /现在就能用：\n  · Pi 扩展发来的通知由日志人格打印在这里/);
    assert.match(
      text,
      /需要配置才能用（写在 \/d\/server\.json）：\n  · 由机器人直接发到 QQ（事件的 delivery 为 "direct"，以及 \/anon-notify 开启前的好友检查）需要 botId \+ recipientId/,
    );
    assert.match(text, /真正的人格（YesImBot）/);
    assert.doesNotMatch(text, /失败|错误|尚未配置/);
  });
  test("the README section it points to is a heading of the README in that language", async () => {
    const readme = await readFile(resolve(import.meta.dirname, "../../README.md"), "utf8");
    const named = [
      ...piInstructions(url, "/d/token", "/d/server.json", bare, "zh-CN").matchAll(/README“([^”]+)”/g),
      ...piInstructions(url, "/d/token", "/d/server.json", bare, "en-US").matchAll(/README, "([^"]+)"/g),
    ].map((match) => match[1]!);
    assert.equal(named.length, 2, named.join(" | "));
    for (const title of named) assert.match(readme, new RegExp(`^#{2,4} ${title.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}$`, "m"), title);
  });
  test("with only the recipient it asks for the bot alone", () => {
    assert.match(piInstructions(url, "/d/token", "/d/server.json", { ...bare, recipientId: "10001" }, "zh-CN"), /需要 botId 和机器人的适配器插件/);
  });
  test("with bot and recipient it names them and asks for nothing", () => {
    const text = piInstructions(url, "/d/token", "/d/server.json", { ...bare, botId: "onebot:20002", recipientId: "10001" }, "zh-CN");
    assert.match(text, /机器人与目标：onebot:20002 → 10001/);
    assert.doesNotMatch(text, /需要配置/);
  });
  test("in English when the locale asks for it", () => {
    const text = piInstructions(url, "/d/token", "/d/server.json", bare, "en-US");
    assert.match(text, /^anon-notify server started/);
    assert.match(text, /Works now:/);
    assert.match(text, /Needs configuring \(in \/d\/server\.json\):/);
    assert.match(text, /README, "Into an existing Koishi; the database"/, "it names the English README section");
    assert.equal(text.match(HAN), null, "no Chinese at all");
  });
  for (const [language, says] of [
    [
      "zh-CN",
      [/这个服务端没有聊天：没有配置机器人，所以不会给任何人发消息/, /Pi 端试用配置.*这里没有聊天，下面两个 QQ 号只是占位，任意两个不同的 5–12 位数字都行/],
    ],
    [
      "en-US",
      [
        /This server has no chat: no bot is configured, so it messages nobody/,
        /Pi side config for a trial .*the two QQ numbers below are placeholders; any two different 5–12 digit numbers will do/,
      ],
    ],
  ] as const) {
    test(`without a bot it says there is no chat and prints a trial config the extension accepts (${language})`, () => {
      const text = piInstructions(url, "/d/token", "/d/server.json", bare, language);
      for (const pattern of says) assert.match(text, pattern);
      const config = JSON.parse(text.slice(text.indexOf("{\n"), text.indexOf("\n}") + 2)) as { recipient: { qq: string; anonQq: string } };
      assert.deepEqual(config.recipient, TRIAL_QQ);
      for (const qq of Object.values(config.recipient)) assert.match(qq, /^[1-9]\d{4,11}$/, "a number /anon-notify accepts");
    });
  }
  test("with a bot the config is the real one, not a trial", () => {
    const text = piInstructions(url, "/d/token", "/d/server.json", { ...bare, botId: "onebot:20002", recipientId: "10001" }, "en-US");
    assert.doesNotMatch(text, /trial|no chat/);
  });
});

/**
 * Words a Chinese text may carry in Latin letters: names and codes, never prose. Everything else
 * English in the Chinese start text is a stray word.
 */
const NAMES_AND_CODES = new Set(
  ["anon", "notify", "webhook", "Pi", "YesImBot", "QQ", "Token", "SQLite", "Koishi", "README", "botId", "recipientId", "delivery", "direct"]
    .concat([
      "onebot",
      "adapter",
      "plugins",
      "notifyWebhook",
      "consoleActions",
      "operator",
      "reload",
      "doctor",
      "Ctrl",
      "mkdir",
      "install",
      "token",
      "config",
      "json",
      "Anon",
      "C",
    ])
    .map((word) => word.toLowerCase()),
);

/** The start text as the person reads it: Koishi's own log lines, paths, URLs and the JSON to copy left out. */
function personText(output: string): string {
  return output
    .split("\n")
    .filter((line) => !/\[[IWDE]\] /.test(line))
    .join("\n")
    .replace(/\{\n[\s\S]*?\n\}/g, "")
    .replace(/https?:\/\/\S+|\/\S+|\{[^}\n]*\}+/g, "");
}

for (const language of ["en-US", "zh-CN"] as const) {
  test(`npm start in ${language}: the whole start text in that language, naming no section of the other`, async (t) => {
    const dir = await tempDir(t);
    const server = await spawnStandalone(dir, await freePort(), { language });
    t.after(() => server.stop());
    const text = personText(server.output());
    assert.ok(text.length > 500, text);
    if (language === "en-US") {
      assert.equal(text.match(HAN), null, `no Chinese:\n${text}`);
      assert.match(text, /This server has no chat/);
    } else {
      const stray = (text.match(/[A-Za-z][A-Za-z-]+/g) ?? []).filter((word) => !word.split("-").every((part) => NAMES_AND_CODES.has(part.toLowerCase())));
      assert.deepEqual(stray, [], `no stray English words:\n${text}`);
      assert.match(text, /这个服务端没有聊天/);
    }
  });
}
