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
import { chmodSync, closeSync, lstatSync, mkdirSync, openSync, readFileSync, statSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { homedir } from "node:os";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Context, ForkScope, Plugin } from "koishi";
import { z } from "zod";
import { errorText, isMissingFile } from "../common/errors.ts";
import { localeLanguage, type Language } from "../common/locale.ts";
import { API_BASE_PATH, formatIssues } from "../protocol/wire.ts";
import { boundConnections } from "./http/connections.ts";
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

/** A token anyone could guess or brute-force is no token: generated ones have 64 characters. */
export const MIN_TOKEN_CHARS = 32;

/**
 * Reads the token, creating it (0600) only when the file does not exist; an existing file is never
 * rewritten. Refused, with what to do: a symlink (the secret would live wherever it points), a file
 * others can read, and a token shorter than `MIN_TOKEN_CHARS`.
 */
export function ensureToken(path: string): string {
  try {
    writeFileSync(path, randomBytes(32).toString("hex") + "\n", { flag: "wx", mode: 0o600 });
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
  }
  const file = lstatSync(path);
  if (file.isSymbolicLink()) throw new Error(`Token 文件 ${path} 是符号链接；请换成普通文件（cp --remove-destination "$(readlink -f ${path})" ${path}）`);
  if (file.mode & 0o077) throw new Error(`Token 文件 ${path} 的权限是 ${octal(file.mode)}，其他用户可读；请执行 chmod 600 ${path}`);
  const token = readFileSync(path, "utf8").trim();
  if (!token) throw new Error(`Token 文件 ${path} 为空；请写入 Token 或删除该文件后重启以重新生成`);
  if (token.length < MIN_TOKEN_CHARS) throw new Error(`Token 文件 ${path} 中的 Token 太短（${token.length} 个字符，至少 ${MIN_TOKEN_CHARS} 个）；请换一个更长的 Token，或删除该文件后重启以重新生成`);
  return token;
}

function octal(mode: number): string {
  return `0${(mode & 0o777).toString(8)}`;
}

/**
 * Makes the data folder 0700 and `koishi.db` 0600 (created empty if missing, so SQLite never
 * creates it with the umask's mode). A folder or database others could read or write is narrowed;
 * returns one line for each change made, for the start-up output.
 */
export function secureDataDir(dataDir: string): string[] {
  const notes: string[] = [];
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  const folderMode = statSync(dataDir).mode;
  if (folderMode & 0o077) {
    chmodSync(dataDir, 0o700);
    notes.push(`数据目录 ${dataDir} 的权限是 ${octal(folderMode)}，其他用户可以访问；已改为 0700`);
  }
  const database = join(dataDir, "koishi.db");
  closeSync(openSync(database, "a", 0o600));
  const databaseMode = statSync(database).mode;
  if (databaseMode & 0o077) {
    chmodSync(database, 0o600);
    notes.push(`数据库 ${database} 的权限是 ${octal(databaseMode)}；已改为 0600`);
  }
  return notes;
}

/** The operator token opens more than the agents' one; the same string for both would give every agent the operator API. */
export function assertDistinctTokens(token: string, operatorToken: string): void {
  if (operatorToken && operatorToken === token) {
    throw new Error("operatorToken 与 Pi 端 Token 相同：这样任何 Pi 端都能使用运维接口。请为 operatorToken 设置不同的值（或留空以关闭运维接口）");
  }
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

const STARTUP = {
  "zh-CN": {
    started: "anon-notify 服务端已启动（notify-webhook 插件，日志人格）",
    colon: "：",
    url: "接口地址",
    tokenFile: "Token 文件",
    worksNow: "现在就能用：",
    logPersona: "Pi 扩展发来的通知由日志人格打印在这里：它代替 YesImBot 的人格，打印人格本会收到的事件块",
    sessions: "在线会话、Pi 的指令通道、运维接口（/operator/*）和看门狗（提醒同样由日志人格打印）",
    needsConfig: (configPath: string) => `需要配置才能用（写在 ${configPath}）：`,
    direct: (missing: string) =>
      `由机器人直接发到 QQ（事件的 delivery 为 "direct"，以及 /anon-notify 开启前的好友检查）需要 ${missing} 和机器人的适配器插件：`,
    directExample: '{"botId": "onebot:<Anon 的 QQ>", "recipientId": "<你的 QQ>", "plugins": {"adapter-onebot": {...}}}',
    persona: "真正的人格（YesImBot）：把 notify-webhook 装进已有的 Koishi，见 README“装进已有的 Koishi”",
    botAndTarget: (bot: string, target: string, configPath: string) => `机器人与目标：${bot} → ${target}（配置文件 ${configPath}）`,
    piConfig: (path: string) => `Pi 端配置（写入 ${path}）：`,
    piToken: "Pi 端 Token（与服务端相同）：",
    then: "然后在 Pi 中执行 /reload 和 /anon-notify；/anon-notify-doctor 检查连接。按 Ctrl-C 停止。",
    operatorToken: (url: string, path: string) => `运维接口（${url}/operator/*）Token 文件：${path}（与 Pi 端 Token 不同）`,
    console: (pageUrl: string, actions: boolean, configPath: string) =>
      actions
        ? `控制台“Pi 会话”页面：${pageUrl}（可发送和撤回指令）`
        : `控制台“Pi 会话”页面：${pageUrl}（只读；要在页面上发送和撤回指令，在 ${configPath} 写入 {"notifyWebhook": {"consoleActions": true}}，本机能访问该端口的人都能操作）`,
    stopping: (signal: string) => `收到 ${signal}，正在停止…`,
    stopped: "已停止。",
    stopFailed: "停止时出错：",
    startFailed: (why: string) => `启动失败：${why}`,
  },
  "en-US": {
    started: "anon-notify server started (notify-webhook plugin, log persona)",
    colon: ": ",
    url: "API",
    tokenFile: "Token file",
    worksNow: "Works now:",
    logPersona: "notices from the Pi extension are printed here by the log persona, which stands in for YesImBot's persona and prints the event block it would receive",
    sessions: "online sessions, Pi's instruction channel, the operator API (/operator/*) and the watchdog (its notices are printed by the log persona too)",
    needsConfig: (configPath: string) => `Needs configuring (in ${configPath}):`,
    direct: (missing: string) =>
      `sending straight to QQ through a bot (events with delivery "direct", and the friend check before /anon-notify switches on) needs ${missing} and the bot's adapter plugin:`,
    directExample: '{"botId": "onebot:<Anon\'s QQ>", "recipientId": "<your QQ>", "plugins": {"adapter-onebot": {...}}}',
    persona: 'a real persona (YesImBot): install notify-webhook into your own Koishi (README, section "装进已有的 Koishi")',
    botAndTarget: (bot: string, target: string, configPath: string) => `Bot and recipient: ${bot} → ${target} (config file ${configPath})`,
    piConfig: (path: string) => `Pi side config (write to ${path}):`,
    piToken: "Pi side token (the same as the server's):",
    then: "Then run /reload and /anon-notify in Pi; /anon-notify-doctor checks the connection. Ctrl-C stops.",
    operatorToken: (url: string, path: string) => `Operator API (${url}/operator/*) token file: ${path} (not the Pi token)`,
    console: (pageUrl: string, actions: boolean, configPath: string) =>
      actions
        ? `Console "Pi sessions" page: ${pageUrl} (can send and cancel instructions)`
        : `Console "Pi sessions" page: ${pageUrl} (read-only; to send and cancel instructions from the page, write {"notifyWebhook": {"consoleActions": true}} into ${configPath}; anyone who can reach this port could then act)`,
    stopping: (signal: string) => `${signal} received, stopping…`,
    stopped: "Stopped.",
    stopFailed: "Error while stopping:",
    startFailed: (why: string) => `Start failed: ${why}`,
  },
} satisfies Record<Language, unknown>;

/**
 * What works now, what needs configuring and for what, and what to put on the Pi side, with the
 * bound address. The log persona is the standalone server's purpose, so it is not reported as a fault.
 */
export function piInstructions(baseUrl: string, tokenPath: string, configPath: string, file: StandaloneFile, language: Language = "zh-CN"): string {
  const text = STARTUP[language];
  const anonQq = file.botId.includes(":") ? file.botId.slice(file.botId.indexOf(":") + 1) : "";
  const piConfig = { endpoint: `${baseUrl}/events`, recipient: { qq: file.recipientId, anonQq } };
  const piDir = join(process.env.PI_CODING_AGENT_DIR ?? join(homedir(), ".pi", "agent"), "extension-data", "anon-notify");
  const missing = [file.botId ? "" : "botId", file.recipientId ? "" : "recipientId"].filter(Boolean).join(" + ");
  return [
    text.started,
    `  ${text.url}${text.colon}${baseUrl}`,
    `  ${text.tokenFile}${text.colon}${tokenPath}`,
    "",
    text.worksNow,
    `  · ${text.logPersona}`,
    `  · ${text.sessions}`,
    ...(missing
      ? [text.needsConfig(configPath), `  · ${text.direct(missing)}`, `      ${text.directExample}`, `  · ${text.persona}`]
      : [text.botAndTarget(file.botId, file.recipientId, configPath)]),
    "",
    text.piConfig(join(piDir, "config.json")),
    JSON.stringify(piConfig, null, 2),
    "",
    text.piToken,
    `  mkdir -p ${piDir} && install -m 600 ${tokenPath} ${join(piDir, "token")}`,
    "",
    text.then,
  ].join("\n");
}

function hostForUrl(host: string): string {
  return host.includes(":") ? `[${host}]` : host;
}

/** The console's page, and how to let it act. */
export function consoleInstructions(pageUrl: string, actions: boolean, configPath: string, language: Language = "zh-CN"): string {
  return STARTUP[language].console(pageUrl, actions, configPath);
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

export interface StandaloneOutput {
  /** Where the start-up text goes (console.log by default); the demo prints its own. */
  announce?: (text: string) => void;
  language?: Language;
}

export async function runStandalone(
  options: StandaloneOptions,
  cwd = process.cwd(),
  output: StandaloneOutput = {},
): Promise<{ baseUrl: string; app: Context; stop(): Promise<void> }> {
  const announce = output.announce ?? ((text: string) => console.log(text));
  const language = output.language ?? localeLanguage(process.env);
  for (const note of secureDataDir(options.dataDir)) announce(note);
  const tokenPath = join(options.dataDir, "token");
  const token = ensureToken(tokenPath);
  const file = readStandaloneFile(options.configPath);
  const operatorTokenPath = join(options.dataDir, "operator.token");
  const operatorToken = file.operatorToken || ensureToken(operatorTokenPath);
  assertDistinctTokens(token, operatorToken);

  const require = createRequire(import.meta.url);
  const app = new koishi.Context();
  app.baseDir = cwd;
  const forks: ForkScope[] = [];
  const use = (plugin: Plugin<Context>, config?: unknown) => {
    forks.push((app.plugin.bind(app) as (plugin: Plugin<Context>, config?: unknown) => ForkScope)(plugin, config));
  };
  use(require("@koishijs/plugin-server").default, { host: options.host, port: options.port, maxPort: options.port + PORT_RANGE });
  // npm start owns this HTTP server (it is created now and listens at start), so it bounds what idle or slow clients can hold.
  boundConnections(app.server._http);
  // Koishi's http service: the chat commands fetch images the owner attaches with it.
  use(require("@koishijs/plugin-http").default);
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
  announce(piInstructions(baseUrl, tokenPath, options.configPath, file, language));
  if (consolePlugin) {
    announce(consoleInstructions(`http://${hostForUrl(reachableHost)}:${app.server.port}/anon-notify`, Boolean(file.notifyWebhook.consoleActions), options.configPath, language));
  }
  if (!file.operatorToken) announce(STARTUP[language].operatorToken(baseUrl, operatorTokenPath));

  return {
    baseUrl,
    app,
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
  const text = STARTUP[localeLanguage(process.env)];
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) process.exit(130);
    stopping = true;
    console.log(text.stopping(signal));
    server.stop().then(
      () => console.log(text.stopped),
      (error: unknown) => {
        console.error(text.stopFailed, error);
        process.exitCode = 1;
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    console.error(STARTUP[localeLanguage(process.env)].startFailed(errorText(error)));
    process.exitCode = 1;
  });
}
