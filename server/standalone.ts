/**
 * `npm start`: a standalone Koishi app carrying the notify-webhook plugin, for people without a
 * Koishi of their own (or to try the extension). Embedded defaults: 127.0.0.1:5140, SQLite under
 * ./data, a token file `<data-dir>/token` created once with mode 0600 and never overwritten (and
 * likewise `<data-dir>/operator.token` for the operator API, unless the config file names one), and
 * the log persona, which prints each event block it would inject.
 *
 *   npm start -- [--host 127.0.0.1] [--port 5140] [--data-dir ./data] [--config <data-dir>/server.json] [--help]
 */
import { randomBytes } from "node:crypto";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Context, ForkScope, Plugin } from "koishi";
import { z } from "zod";
import { errorText, isMissingFile } from "../common/errors.ts";
import { API_BASE_PATH, formatIssues } from "../protocol/wire.ts";
import { koishi } from "./koishi.ts";
import * as notifyWebhook from "./notify-webhook.ts";

export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 5140;
/** Like Koishi's own boilerplate: a busy port moves the server up to this many ports higher. */
const PORT_RANGE = 9;

/** `<data-dir>/server.json` (or `--config`): who hears direct events, and any extra Koishi plugins (the bot's adapter). */
export const StandaloneFile = z.strictObject({
  botId: z.string().default(""),
  recipientId: z.string().default(""),
  operatorToken: z.string().default(""),
  /** Koishi plugins to load before notify-webhook, by package name, e.g. `{"adapter-onebot": {...}}`. */
  plugins: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
  /** Other notify-webhook options (see its Config), e.g. `{"eventsPerMinute": 120}`. */
  notifyWebhook: z.record(z.string(), z.unknown()).default({}),
});
export type StandaloneFile = z.infer<typeof StandaloneFile>;

export interface StandaloneOptions {
  host: string;
  port: number;
  dataDir: string;
  configPath: string;
}

export const USAGE = [
  "用法 / Usage: npm start -- [选项 / options]",
  "",
  `  --host <地址>       监听地址 / address to listen on (默认 / default ${DEFAULT_HOST})`,
  `  --port <端口>       监听端口，被占用时向上顺延最多 ${PORT_RANGE} 个 / port; a busy one moves up to ${PORT_RANGE} higher (默认 / default ${DEFAULT_PORT})`,
  "  --data-dir <目录>   SQLite、Token 文件所在目录 / folder for SQLite and the token files (默认 / default ./data)",
  "  --config <文件>     机器人、目标与插件配置 / bot, recipient and plugin settings (默认 / default <data-dir>/server.json)",
  "  -h, --help          显示本说明 / show this help",
].join("\n");

/** The options to run with, or "help" when the user asked for usage. */
export function parseFlags(argv: string[], cwd: string): StandaloneOptions | "help" {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string", default: DEFAULT_HOST },
      port: { type: "string", default: String(DEFAULT_PORT) },
      "data-dir": { type: "string", default: "data" },
      config: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) return "help";
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(`--port 必须是 1–65535 的整数，收到 ${values.port}`);
  const dataDir = resolve(cwd, values["data-dir"]);
  return { host: values.host, port, dataDir, configPath: values.config ? resolve(cwd, values.config) : join(dataDir, "server.json") };
}

/** Reads the token, creating it (0600) only when the file does not exist; an existing file is never rewritten. */
export function ensureToken(path: string): string {
  try {
    writeFileSync(path, randomBytes(32).toString("hex") + "\n", { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const token = readFileSync(path, "utf8").trim();
  if (!token) throw new Error(`Token 文件 ${path} 为空；请写入 Token 或删除该文件后重启以重新生成`);
  return token;
}

export function readStandaloneFile(path: string): StandaloneFile {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return StandaloneFile.parse({});
    throw error;
  }
  const parsed = StandaloneFile.safeParse(JSON.parse(raw));
  if (!parsed.success) throw new Error(`配置文件 ${path} 无效：${formatIssues(parsed.error, "(根)")}`);
  return parsed.data;
}

/** What to put on the Pi side, in Chinese, with the bound address. */
export function piInstructions(baseUrl: string, tokenPath: string, configPath: string, file: StandaloneFile): string {
  const anonQq = file.botId.includes(":") ? file.botId.slice(file.botId.indexOf(":") + 1) : "";
  const piConfig = { endpoint: `${baseUrl}/events`, recipient: { qq: file.recipientId, anonQq } };
  const piDir = join(process.env.PI_CODING_AGENT_DIR ?? join(homedir(), ".pi", "agent"), "extension-data", "anon-notify");
  return [
    "anon-notify 服务端已启动（notify-webhook 插件，日志人格）",
    `  接口地址：${baseUrl}`,
    `  Token 文件：${tokenPath}`,
    "",
    `Pi 端配置（写入 ${join(piDir, "config.json")}）：`,
    JSON.stringify(piConfig, null, 2),
    "",
    "Pi 端 Token（与服务端相同）：",
    `  mkdir -p ${piDir} && install -m 600 ${tokenPath} ${join(piDir, "token")}`,
    "",
    file.recipientId && file.botId
      ? `机器人与目标：${file.botId} → ${file.recipientId}（配置文件 ${configPath}）`
      : `尚未配置机器人与目标，direct 事件会失败。可在 ${configPath} 写入：\n  {"botId": "onebot:<Anon 的 QQ>", "recipientId": "<你的 QQ>", "plugins": {"adapter-onebot": {...}}}`,
    "然后在 Pi 中执行 /reload 和 /anon-notify。按 Ctrl-C 停止。",
  ].join("\n");
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** The console's page, and how to let it act. */
export function consoleInstructions(pageUrl: string, actions: boolean, configPath: string): string {
  return actions
    ? `控制台“Pi 会话”页面：${pageUrl}（可发送和撤回指令）`
    : `控制台“Pi 会话”页面：${pageUrl}（只读；要在页面上发送和撤回指令，在 ${configPath} 写入 {"notifyWebhook": {"consoleActions": true}}，本机能访问该端口的人都能操作）`;
}

/** The console is a development dependency: a clone has it, an install without it runs without the page. */
function optionalPlugin(require: NodeJS.Require, name: string): Plugin<Context> | undefined {
  try {
    return require(name).default as Plugin<Context>;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND") return undefined;
    throw error;
  }
}

function loadPlugin(name: string, cwd: string): Plugin<Context> {
  const require = createRequire(join(cwd, "package.json"));
  for (const candidate of [`koishi-plugin-${name}`, `@koishijs/plugin-${name}`, name]) {
    try {
      const module = require(candidate);
      return module.default ?? module;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "MODULE_NOT_FOUND") throw error;
    }
  }
  throw new Error(`找不到 Koishi 插件 ${name}（试过 koishi-plugin-${name}、@koishijs/plugin-${name}），请先 npm install`);
}

export async function runStandalone(options: StandaloneOptions, cwd = process.cwd()): Promise<{ baseUrl: string; stop(): Promise<void> }> {
  mkdirSync(options.dataDir, { recursive: true, mode: 0o700 });
  const tokenPath = join(options.dataDir, "token");
  const token = ensureToken(tokenPath);
  const file = readStandaloneFile(options.configPath);
  const operatorTokenPath = join(options.dataDir, "operator.token");
  const operatorToken = file.operatorToken || ensureToken(operatorTokenPath);

  const require = createRequire(import.meta.url);
  const app = new koishi.Context();
  app.baseDir = cwd;
  const forks: ForkScope[] = [];
  const use = (plugin: Plugin<Context>, config?: unknown) => {
    forks.push((app.plugin.bind(app) as (plugin: Plugin<Context>, config?: unknown) => ForkScope)(plugin, config));
  };
  use(require("@koishijs/plugin-server").default, { host: options.host, port: options.port, maxPort: options.port + PORT_RANGE });
  use(require("@minatojs/driver-sqlite").default, { path: join(options.dataDir, "koishi.db") });
  const consolePlugin = optionalPlugin(require, "@koishijs/plugin-console");
  if (consolePlugin) use(consolePlugin, { open: false });
  for (const [name, config] of Object.entries(file.plugins)) use(loadPlugin(name, cwd), config);
  use(notifyWebhook, {
    ...file.notifyWebhook,
    token,
    operatorToken,
    botId: file.botId,
    recipientId: file.recipientId,
    logPersona: true,
  });
  await app.start();
  await new Promise<void>((resolveReady) => app.on("server/ready", () => resolveReady()));
  // A wildcard host listens everywhere; Pi on this machine reaches it through loopback.
  const reachableHost = ["0.0.0.0", "::"].includes(options.host) ? "127.0.0.1" : options.host;
  const baseUrl = `http://${hostForUrl(reachableHost)}:${app.server.port}${API_BASE_PATH}`;
  console.log(piInstructions(baseUrl, tokenPath, options.configPath, file));
  if (consolePlugin) console.log(consoleInstructions(`http://${hostForUrl(reachableHost)}:${app.server.port}/anon-notify`, Boolean(file.notifyWebhook.consoleActions), options.configPath));
  if (!file.operatorToken) console.log(`运维接口（${baseUrl}/operator/*）Token 文件：${operatorTokenPath}（与 Pi 端 Token 不同）`);

  return {
    baseUrl,
    async stop() {
      // plugin-server's dispose throws once the logger is gone, so the forks go first, newest first.
      for (const fork of forks.reverse()) fork.dispose();
      await app.stop();
    },
  };
}

async function main(): Promise<void> {
  let options: StandaloneOptions | "help";
  try {
    options = parseFlags(process.argv.slice(2), process.cwd());
  } catch (error) {
    console.error(`参数错误 / Invalid arguments: ${errorText(error)}`);
    console.error(USAGE);
    process.exitCode = 2;
    return;
  }
  if (options === "help") {
    console.log(USAGE);
    return;
  }
  const server = await runStandalone(options);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) process.exit(130);
    stopping = true;
    console.log(`收到 ${signal}，正在停止…`);
    server.stop().then(
      () => console.log("已停止。"),
      (error: unknown) => {
        console.error("停止时出错：", error);
        process.exitCode = 1;
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    console.error(`启动失败：${errorText(error)}`);
    process.exitCode = 1;
  });
}
