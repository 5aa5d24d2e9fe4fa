import type { Language } from "../../common/locale.ts";
import { PAIRING_TTL_MS } from "../../protocol/pairing.ts";

export const DEFAULT_HOST = "127.0.0.1";
export const DEFAULT_PORT = 5140;
/** Like Koishi's own boilerplate: a busy port moves the server up to this many ports higher. */
export const PORT_RANGE = 9;

const TEXT = {
  "zh-CN": {
    usage: [
      "用法：npm start -- [选项]",
      "",
      `  --host <地址>       监听地址（默认 ${DEFAULT_HOST}）`,
      `  --port <端口>       监听端口，被占用时向上顺延最多 ${PORT_RANGE} 个（默认 ${DEFAULT_PORT}）`,
      "  --data-dir <目录>   SQLite 数据库和 Token 文件所在目录（默认 ./data）",
      "  --config <文件>     机器人、目标、语言与插件配置（默认 <data-dir>/server.json）",
      "  -h, --help          显示本说明",
      "",
      '语言：server.json 里的 "language"（"zh-CN" 或 "en-US"），否则按环境变量 LC_ALL / LANG。',
    ],
    invalidArgs: (why: string) => `参数错误：${why}`,
    badPort: (value: string) => `--port 必须是 1–65535 的整数，收到 ${value}`,
    started: "anon-notify 服务端已启动（notify-webhook 插件，日志人格）",
    colon: "：",
    url: "接口地址",
    tokenFile: "Token 文件",
    worksNow: "现在就能用：",
    logPersona: "Pi 扩展发来的通知由日志人格打印在这里：它代替 YesImBot 的人格，打印人格本会收到的事件块",
    sessions: "在线会话、Pi 的指令通道、运维接口（/operator/*）和看门狗（提醒同样由日志人格打印）",
    noChat: "这个服务端没有聊天：没有配置机器人，所以不会给任何人发消息，通知只打印在这个终端里。",
    needsConfig: (configPath: string) => `需要配置才能用（写在 ${configPath}）：`,
    direct: (missing: string) => `由机器人直接发到 QQ（事件的 delivery 为 "direct"，以及 /anon-notify 开启前的好友检查）需要 ${missing} 和机器人的适配器插件：`,
    directExample: '{"botId": "onebot:<Anon 的 QQ>", "recipientId": "<你的 QQ>", "plugins": {"adapter-onebot": {...}}}',
    persona: "真正的人格（YesImBot）：把 notify-webhook 装进已有的 Koishi，见 README“装进已有的 Koishi”",
    botAndTarget: (bot: string, target: string, configPath: string) => `机器人与目标：${bot} → ${target}（配置文件 ${configPath}）`,
    pair: (minutes: number) => `让 Pi 与这个服务端配对：在 Pi 中执行下面这一行（配对码只能用一次，${minutes} 分钟内有效；重启 npm start 可得新码）：`,
    paired:
      "它把接口地址、目标和 Token（权限 600）写入 ~/.pi/agent/extension-data/anon-notify/，并检查这个服务端；然后在 Pi 中执行 /anon-notify 开启当前会话。",
    trialRecipient: "这里没有聊天，配对写入的两个 QQ 号只是占位，不会给它们发任何消息；接上真正的机器人后再配对一次。",
    then: "/anon-notify-doctor 检查连接。按 Ctrl-C 停止。",
    operatorToken: (url: string, path: string) => `运维接口（${url}/operator/*）Token 文件：${path}（与 Pi 端 Token 不同）`,
    consoleTitle: "Koishi 控制台",
    console: (link: string, tokenPath: string, openToAll: boolean) =>
      [
        `控制台“Pi 会话”页面（打开此链接即登录）：${link}`,
        `  登录 Token 文件：${tokenPath}（删除它再重启即换新 Token，所有浏览器退出登录）`,
        ...(openToAll ? ["  注意：已开启 consoleActions，任何能访问此端口的人不用登录即可查看和操作"] : []),
      ].join("\n"),
    folderNarrowed: (path: string, mode: string) => `数据目录 ${path} 的权限是 ${mode}，其他用户可以访问；已改为 0700`,
    databaseNarrowed: (path: string, mode: string) => `数据库 ${path} 的权限是 ${mode}；已改为 0600`,
    badConfigFile: (path: string, why: string) => `配置文件 ${path} 无效：${why}`,
    weakConfigToken: (path: string, length: number, min: number) =>
      `配置文件 ${path} 中的 operatorToken 太短（${length} 个字符，至少 ${min} 个）；请换一个更长的，或删掉这一项，让服务端生成 operator.token 文件`,
    openConfigFile: (path: string, mode: string) => `配置文件 ${path} 里写着 operatorToken，但它的权限是 ${mode}，其他用户可读；请执行 chmod 600 ${path}`,
    configRoot: "（根）",
    sameTokens: "operatorToken 与 Pi 端 Token 相同：这样任何 Pi 端都能使用运维接口。请为 operatorToken 设置不同的值（或留空以关闭运维接口）",
    pluginNotFound: (name: string) => `找不到 Koishi 插件 ${name}（试过 koishi-plugin-${name}、@koishijs/plugin-${name}），请先 npm install`,
    stopping: (signal: string) => `收到 ${signal}，正在停止…`,
    stopped: "已停止。",
    stopFailed: "停止时出错：",
    startFailed: (why: string) => `启动失败：${why}`,
  },
  "en-US": {
    usage: [
      "Usage: npm start -- [options]",
      "",
      `  --host <address>    address to listen on (default ${DEFAULT_HOST})`,
      `  --port <port>       port to listen on; a busy one moves up to ${PORT_RANGE} higher (default ${DEFAULT_PORT})`,
      "  --data-dir <dir>    folder for the SQLite database and the token files (default ./data)",
      "  --config <file>     bot, recipient, language and plugin settings (default <data-dir>/server.json)",
      "  -h, --help          show this help",
      "",
      'Language: "language" in server.json ("zh-CN" or "en-US"), else the LC_ALL / LANG environment variables.',
    ],
    invalidArgs: (why: string) => `Invalid arguments: ${why}`,
    badPort: (value: string) => `--port must be a whole number from 1 to 65535, got ${value}`,
    started: "anon-notify server started (notify-webhook plugin, log persona)",
    colon: ": ",
    url: "API",
    tokenFile: "Token file",
    worksNow: "Works now:",
    logPersona:
      "notices from the Pi extension are printed here by the log persona, which stands in for YesImBot's persona and prints the event block it would receive",
    sessions: "online sessions, Pi's instruction channel, the operator API (/operator/*) and the watchdog (its notices are printed by the log persona too)",
    noChat: "This server has no chat: no bot is configured, so it messages nobody; notices are only printed in this terminal.",
    needsConfig: (configPath: string) => `Needs configuring (in ${configPath}):`,
    direct: (missing: string) =>
      `sending straight to QQ through a bot (events with delivery "direct", and the friend check before /anon-notify switches on) needs ${missing} and the bot's adapter plugin:`,
    directExample: '{"botId": "onebot:<Anon\'s QQ>", "recipientId": "<your QQ>", "plugins": {"adapter-onebot": {...}}}',
    persona: 'a real persona (YesImBot): install notify-webhook into your own Koishi (README, "Into an existing Koishi; the database")',
    botAndTarget: (bot: string, target: string, configPath: string) => `Bot and recipient: ${bot} → ${target} (config file ${configPath})`,
    pair: (minutes: number) =>
      `Pair Pi with this server: in Pi, run this one line (the code works once, for ${minutes} minutes; restart npm start for a new one):`,
    paired:
      "It writes the endpoint, the recipient and the token (mode 600) to ~/.pi/agent/extension-data/anon-notify/ and checks this server; then /anon-notify in Pi switches a session on.",
    trialRecipient:
      "There is no chat here, so the two QQ numbers pairing writes are placeholders that nothing is ever sent to; pair again once a real bot is connected.",
    then: "/anon-notify-doctor checks the connection. Ctrl-C stops.",
    operatorToken: (url: string, path: string) => `Operator API (${url}/operator/*) token file: ${path} (not the Pi token)`,
    consoleTitle: "Koishi console",
    console: (link: string, tokenPath: string, openToAll: boolean) =>
      [
        `Console "Pi sessions" page (this link signs you in): ${link}`,
        `  Sign-in token file: ${tokenPath} (delete it and restart for a new token; every browser is signed out)`,
        ...(openToAll ? ["  Warning: consoleActions is on: anyone who can reach this port can see and act without signing in"] : []),
      ].join("\n"),
    folderNarrowed: (path: string, mode: string) => `The data folder ${path} had mode ${mode}, open to other users; changed to 0700`,
    databaseNarrowed: (path: string, mode: string) => `The database ${path} had mode ${mode}; changed to 0600`,
    badConfigFile: (path: string, why: string) => `The config file ${path} is invalid: ${why}`,
    weakConfigToken: (path: string, length: number, min: number) =>
      `The operatorToken in ${path} is too short (${length} characters, at least ${min}); use a longer one, or remove it and let the server create the operator.token file`,
    openConfigFile: (path: string, mode: string) => `${path} holds an operatorToken but its mode is ${mode}, readable by other users; run chmod 600 ${path}`,
    configRoot: "(root)",
    sameTokens:
      "operatorToken is the same as the Pi side's token: every Pi could then use the operator API. Give operatorToken a different value (or leave it empty to turn the operator API off)",
    pluginNotFound: (name: string) => `Koishi plugin ${name} not found (tried koishi-plugin-${name}, @koishijs/plugin-${name}); run npm install first`,
    stopping: (signal: string) => `${signal} received, stopping…`,
    stopped: "Stopped.",
    stopFailed: "Error while stopping:",
    startFailed: (why: string) => `Start failed: ${why}`,
  },
} satisfies Record<Language, unknown>;

export function standaloneText(language: Language) {
  return TEXT[language];
}

export function usage(language: Language): string {
  return TEXT[language].usage.join("\n");
}

/** What works now, what needs configuring and for what, and the one line that pairs a Pi, with the bound address. The log persona is the standalone server's
 * purpose, so it is not reported as a fault; without a bot there is no chat, and the recipient pairing writes is a placeholder, said so. */
export function piInstructions(
  baseUrl: string,
  pairLink: string,
  tokenPath: string,
  configPath: string,
  file: { botId: string; recipientId: string },
  language: Language,
): string {
  const text = TEXT[language];
  const chat = file.botId !== "";
  const missing = [file.botId ? "" : "botId", file.recipientId ? "" : "recipientId"].filter(Boolean).join(" + ");
  return [
    text.started,
    `  ${text.url}${text.colon}${baseUrl}`,
    `  ${text.tokenFile}${text.colon}${tokenPath}`,
    "",
    text.worksNow,
    `  · ${text.logPersona}`,
    `  · ${text.sessions}`,
    ...(chat ? [] : ["", text.noChat]),
    ...(missing
      ? [text.needsConfig(configPath), `  · ${text.direct(missing)}`, `      ${text.directExample}`, `  · ${text.persona}`]
      : [text.botAndTarget(file.botId, file.recipientId, configPath)]),
    "",
    text.pair(PAIRING_TTL_MS / 60_000),
    `  /anon-notify-setup ${pairLink}`,
    text.paired,
    ...(chat ? [] : [text.trialRecipient]),
    "",
    text.then,
  ].join("\n");
}

/** The console's `<head>` under npm start: its title, and the language the page then gives the whole console (console/client/index.ts). */
export function consoleHead(language: Language): { tag: string; attrs?: Record<string, string>; content?: string }[] {
  return [
    { tag: "title", content: TEXT[language].consoleTitle },
    { tag: "meta", attrs: { name: "anon-notify-language", content: language } },
  ];
}
