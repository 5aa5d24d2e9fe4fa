/**
 * The configuration's texts (load errors, warnings, recipient problems, the schema's own checks),
 * in Chinese and English; part of the catalogue messages.ts composes. zod's own messages come from
 * zod's locales (config.ts); these are the words zod does not have.
 */

/** The schema's own checks, named by key so each language words them (schema-rules.ts sets them as `params.text`). */
export const SCHEMA_CHECKS = ["absolutePath", "httpUrl", "socketUrl", "socketHostPort", "socketNotAbsolute", "regex", "sourceVariables"] as const;
export type SchemaCheck = (typeof SCHEMA_CHECKS)[number];

export const zhConfig = {
  file: (path: string) => `配置文件 ${path}`,
  env: (name: string) => `环境变量 ${name}`,
  root: "（顶层）",
  unknownKey: (where: string, key: string, suggestion: string | null) => `${where}：未知配置项 ${key}${suggestion ? `，是否想写 ${suggestion}？` : ""}`,
  invalid: (where: string, key: string, why: string) => `${where}：${key} 无效：${why}`,
  unreadable: (path: string, why: string) => `配置文件 ${path} 无法读取：${why}`,
  notObject: (path: string) => `配置文件 ${path}：顶层必须是 JSON 对象`,
  notJson: (path: string, why: string) => `配置文件 ${path} 不是有效的 JSON：${why}`,
  envBoolean: (name: string, raw: string) => `环境变量 ${name}：应为 true/false/1/0/yes/no/on/off，实际为 ${raw}`,
  selfTrust: (path: string) => `配置文件 ${path}：项目配置不能设置 projectConfig（项目不能信任自己）`,
  userOnly: (path: string, key: string) =>
    `配置文件 ${path}：项目配置不能设置 ${key}，已忽略这一项（通知发到哪里、令牌从哪里读、文件写到哪里只由用户配置或环境变量决定）`,
  weakensApproval: (path: string, key: string) => `配置文件 ${path}：项目配置只能开启审批，不能放宽（approval.${key}）`,
  legacyLocation: (old: string, current: string) => `正在使用旧源码目录的配置 ${old}，请迁移到 ${current}`,
  projectUntrusted: (path: string) => `项目配置 ${path} 未读取：Pi 未信任此项目`,
  projectConfigOff: (path: string) => `项目配置 ${path} 未读取：用户配置未开启 projectConfig`,
  legacyFollowUp: 'command.deliveryWhenBusy 的旧值 "followUp" 已按 "steer" 处理',
  legacyContent: (key: string) => `content.${key} 已停用，按 false 处理`,
  legacyCancelled: "notify.cancelled 仅为兼容保留，不再生效",
  legacyBatch: "command.maxBatchSize 仅为兼容保留，每次只领取一条指令",
  noQq: "未配置目标 QQ（recipient.qq）",
  badQq: (value: string) => `目标 QQ（recipient.qq）无效：应为 5–12 位数字，实际为 "${value}"`,
  noAnonQq: "未配置 Anon 的 QQ（recipient.anonQq）",
  badAnonQq: (value: string) => `Anon 的 QQ（recipient.anonQq）无效：应为 5–12 位数字，实际为 "${value}"`,
  sameQq: "目标 QQ 与 Anon 的 QQ 相同，Anon 不能通知自己",
  tokenUnreadable: (file: string, code: string) => `令牌文件 ${file} 无法读取（${code}）`,
  check: {
    absolutePath: "应为绝对路径，或以 ~/ 或 {dataDir} 开头",
    httpUrl: "应为 http(s) 网址",
    socketUrl: "应为本机套接字路径，不能是网址（桌面通道从不离开本机）",
    socketHostPort: "应为本机套接字路径，不能是 主机:端口（桌面通道从不离开本机）",
    socketNotAbsolute: "应为绝对套接字路径，或以 ~/ 开头",
    regex: "应为有效的正则表达式",
    sourceVariables: "只能使用变量 {project} {cwd} {sessionId} {model} {mode}",
  } satisfies Record<SchemaCheck, string>,
};

export const enConfig: typeof zhConfig = {
  file: (path) => `config file ${path}`,
  env: (name) => `environment variable ${name}`,
  root: "(top level)",
  unknownKey: (where, key, suggestion) => `${where}: unknown key ${key}${suggestion ? `; did you mean ${suggestion}?` : ""}`,
  invalid: (where, key, why) => `${where}: ${key} is invalid: ${why}`,
  unreadable: (path, why) => `config file ${path} cannot be read: ${why}`,
  notObject: (path) => `config file ${path}: the top level must be a JSON object`,
  notJson: (path, why) => `config file ${path} is not valid JSON: ${why}`,
  envBoolean: (name, raw) => `environment variable ${name}: expected true/false/1/0/yes/no/on/off, got ${raw}`,
  selfTrust: (path) => `config file ${path}: a project config cannot set projectConfig (a project cannot trust itself)`,
  userOnly: (path, key) =>
    `config file ${path}: a project config cannot set ${key}; ignored (only the user's config or the environment decides where notices and the token go, where the token is read and where files are written)`,
  weakensApproval: (path, key) => `config file ${path}: a project config can only switch approvals on, never weaken them (approval.${key})`,
  legacyLocation: (old, current) => `Using the config in the old source folder ${old}; move it to ${current}`,
  projectUntrusted: (path) => `Project config ${path} not read: Pi does not trust this project`,
  projectConfigOff: (path) => `Project config ${path} not read: projectConfig is off in the user's config`,
  legacyFollowUp: 'command.deliveryWhenBusy: the old value "followUp" is treated as "steer"',
  legacyContent: (key) => `content.${key} is retired and treated as false`,
  legacyCancelled: "notify.cancelled is kept for compatibility only and has no effect",
  legacyBatch: "command.maxBatchSize is kept for compatibility only; one instruction is claimed at a time",
  noQq: "the recipient's QQ (recipient.qq) is not set",
  badQq: (value) => `the recipient's QQ (recipient.qq) is invalid: expected 5–12 digits, got "${value}"`,
  noAnonQq: "Anon's QQ (recipient.anonQq) is not set",
  badAnonQq: (value) => `Anon's QQ (recipient.anonQq) is invalid: expected 5–12 digits, got "${value}"`,
  sameQq: "the recipient's QQ and Anon's QQ are the same; Anon cannot notify itself",
  tokenUnreadable: (file, code) => `token file ${file} cannot be read (${code})`,
  check: {
    absolutePath: "must be an absolute path, or start with ~/ or {dataDir}",
    httpUrl: "must be an http(s) URL",
    socketUrl: "must be a local socket path, not a URL (the desktop channel never leaves this machine)",
    socketHostPort: "must be a local socket path, not host:port (the desktop channel never leaves this machine)",
    socketNotAbsolute: "must be an absolute socket path or start with ~/",
    regex: "must be a valid regular expression",
    sourceVariables: "may only use the variables {project} {cwd} {sessionId} {model} {mode}",
  },
};
