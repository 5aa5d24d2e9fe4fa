/**
 * The extension's configuration, loaded in layers (defaults < legacy < user < trusted project <
 * environment) into the schema of schema.ts. Reads files, never writes them: legacy keys are
 * normalised in memory only, so a user's file is never rewritten behind their back.
 */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorText, isMissingFile } from "../../common/errors.ts";
import { isLanguage, type Language } from "../messages.ts";
import { Config, DEFAULT_CONFIG, type SourceVariables } from "./schema.ts";

/** Pi's agent folder, as Pi's own `getAgentDir()` finds it but from an injected environment. */
export function agentDirFrom(env: NodeJS.ProcessEnv, home: string = homedir()): string {
  const fromEnv = env.PI_CODING_AGENT_DIR;
  return fromEnv ? expandHome(fromEnv, home) : join(home, ".pi", "agent");
}

/** This extension's own folder under Pi's agent folder: user config, token, outbox, journal. */
export function dataDirFor(agentDir: string): string {
  return join(agentDir, "extension-data", "anon-notify");
}

function expandHome(path: string, home: string): string {
  if (path === "~") return home;
  return path.startsWith("~/") ? join(home, path.slice(2)) : path;
}

/**
 * Legacy values, normalised in one place and only in memory:
 * `command.deliveryWhenBusy: "followUp"` becomes `"steer"` (waiting for the whole task to go idle
 * is gone), and `content.includeModel/includeDuration/includeToolCounts` become false (the model
 * name, duration and tool counts are no longer appended). `notify.cancelled` and
 * `command.maxBatchSize` are kept as read and have no effect.
 */
export function normaliseLegacy(config: Config): { config: Config; warnings: string[] } {
  const warnings: string[] = [];
  const command = { ...config.command };
  if (command.deliveryWhenBusy === "followUp") {
    command.deliveryWhenBusy = "steer";
    warnings.push('command.deliveryWhenBusy 的旧值 "followUp" 已按 "steer" 处理 (legacy value normalised to "steer")');
  }
  const content = { ...config.content };
  for (const key of ["includeModel", "includeDuration", "includeToolCounts"] as const) {
    if (content[key] === true) warnings.push(`content.${key} 已停用，按 false 处理 (legacy key, always false)`);
    if (content[key] !== undefined) content[key] = false;
  }
  if (config.notify.cancelled !== undefined) warnings.push("notify.cancelled 仅为兼容保留，不再生效 (legacy key, no effect)");
  if (command.maxBatchSize !== undefined) warnings.push("command.maxBatchSize 仅为兼容保留，每次只领取一条指令 (legacy key, ignored)");
  return { config: { ...config, command, content }, warnings };
}

export type ConfigLayer = "legacy" | "user" | "project";
export interface ConfigFileInfo {
  layer: ConfigLayer;
  path: string;
  /** `skipped`: present but not read because the project is not trusted. */
  status: "loaded" | "missing" | "skipped" | "invalid";
}
/** Which layer set a key last: a file's path, or an environment variable's name. */
export interface ConfigOrigin {
  layer: ConfigLayer | "env";
  where: string;
}
export type LoadConfigResult =
  | { ok: true; config: Config; files: ConfigFileInfo[]; warnings: string[]; origins: Record<string, ConfigOrigin> }
  /** `language`: the newest valid `language` any layer asked for, so the errors can be shown in it. */
  | { ok: false; errors: string[]; files: ConfigFileInfo[]; language?: Language };

export interface LoadConfigOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  /** Defaults to agentDirFrom(env). */
  agentDir?: string;
  /** The extension's source folder holding the legacy `config.json`; defaults to this file's folder. */
  legacyDir?: string;
  /** Pi's own verdict on the project folder (`ctx.isProjectTrusted()`); defaults to false. */
  projectTrusted?: boolean;
}

const ENV_KEYS: Record<string, { path: string[]; kind: "boolean" | "string" }> = {
  ANON_NOTIFY_ENABLED: { path: ["enabled"], kind: "boolean" },
  ANON_NOTIFY_ENDPOINT: { path: ["endpoint"], kind: "string" },
  ANON_NOTIFY_TOKEN: { path: ["token"], kind: "string" },
  ANON_NOTIFY_SOURCE: { path: ["source"], kind: "string" },
  ANON_NOTIFY_RECIPIENT_QQ: { path: ["recipient", "qq"], kind: "string" },
  ANON_NOTIFY_ANON_QQ: { path: ["recipient", "anonQq"], kind: "string" },
  ANON_NOTIFY_SINK_ENABLED: { path: ["sink", "enabled"], kind: "boolean" },
  ANON_NOTIFY_SINK_SOCKET: { path: ["sink", "socket"], kind: "string" },
  ANON_NOTIFY_SINK_TOKEN_FILE: { path: ["sink", "tokenFile"], kind: "string" },
};
const ENV_TRUE = new Set(["1", "true", "yes", "on"]);
const ENV_FALSE = new Set(["0", "false", "no", "off"]);

type Json = Record<string, unknown>;
const isPlainObject = (value: unknown): value is Json => typeof value === "object" && value !== null && !Array.isArray(value);

/** Later layers win key by key; sections merge, anything else (arrays included) is replaced. */
function deepMerge(base: Json, over: Json): Json {
  const out: Json = { ...base };
  for (const [key, value] of Object.entries(over)) {
    if (value === undefined) continue;
    out[key] = isPlainObject(value) && isPlainObject(out[key]) ? deepMerge(out[key] as Json, value) : value;
  }
  return out;
}

/** The dotted paths of a layer's values; arrays are values, as deepMerge treats them. */
function leafPaths(value: Json, prefix = ""): string[] {
  return Object.entries(value).flatMap(([key, inner]) =>
    inner === undefined ? [] : isPlainObject(inner) ? leafPaths(inner, `${prefix}${key}.`) : [`${prefix}${key}`],
  );
}

function setPath(target: Json, path: string[], value: unknown): Json {
  const [head, ...rest] = path;
  if (head === undefined) return target;
  return { ...target, [head]: rest.length === 0 ? value : setPath(isPlainObject(target[head]) ? (target[head] as Json) : {}, rest, value) };
}

/**
 * Checks one layer on its own, merged over the defaults, so every problem is reported against the
 * file (or variable) that caused it. Returns messages naming `where` and the key path.
 */
function layerProblems(layer: Json, where: string): string[] {
  const result = Config.safeParse(deepMerge(DEFAULT_CONFIG as unknown as Json, layer));
  if (result.success) return [];
  return result.error.issues.flatMap((issue) => {
    const at = issue.path.map(String).join(".");
    if (issue.code === "unrecognized_keys") return issue.keys.map((key) => `${where}: 未知配置项 (unknown key) ${at ? `${at}.` : ""}${key}`);
    return [`${where}: ${at || "(根)"} 无效 (invalid): ${issue.message}`];
  });
}

type ReadOutcome = { status: "missing" } | { status: "loaded"; value: Json } | { status: "invalid"; error: string };
function readLayerFile(path: string): ReadOutcome {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return { status: "missing" };
    return { status: "invalid", error: `配置文件 ${path} 无法读取 (unreadable): ${errorText(error)}` };
  }
  try {
    const value: unknown = JSON.parse(text);
    if (!isPlainObject(value)) return { status: "invalid", error: `配置文件 ${path}: 顶层必须是 JSON 对象 (top level must be an object)` };
    return { status: "loaded", value };
  } catch (error) {
    return { status: "invalid", error: `配置文件 ${path} 不是有效的 JSON (invalid JSON): ${errorText(error)}` };
  }
}

function envLayer(env: NodeJS.ProcessEnv): { layer: Json; errors: string[]; names: Record<string, string> } {
  let layer: Json = {};
  const errors: string[] = [];
  const names: Record<string, string> = {};
  for (const [name, { path, kind }] of Object.entries(ENV_KEYS)) {
    const raw = env[name];
    // An empty variable counts as unset, as Pi treats an empty PI_CODING_AGENT_DIR.
    if (raw === undefined || raw === "") continue;
    let value: unknown = raw;
    if (kind === "boolean") {
      const lower = raw.trim().toLowerCase();
      if (!ENV_TRUE.has(lower) && !ENV_FALSE.has(lower)) {
        errors.push(`环境变量 ${name}: 应为 true/false/1/0/yes/no/on/off (expected a boolean), 实际为 ${JSON.stringify(raw)}`);
        continue;
      }
      value = ENV_TRUE.has(lower);
    }
    const single = setPath({}, path, value);
    const problems = layerProblems(single, `环境变量 ${name}`);
    if (problems.length > 0) errors.push(...problems);
    else {
      layer = deepMerge(layer, single);
      names[path.join(".")] = name;
    }
  }
  return { layer, errors, names };
}

function resolvePaths(config: Config, dataDir: string, home: string): Config {
  const socket = expandHome(config.sink.socket, home);
  const resolve = (path: string) => expandHome(path.replace("{dataDir}", dataDir).replace("{socketDir}", dirname(socket)), home);
  return {
    ...config,
    tokenFile: resolve(config.tokenFile),
    command: { ...config.command, journal: resolve(config.command.journal) },
    sink: { ...config.sink, socket, tokenFile: resolve(config.sink.tokenFile) },
  };
}

/**
 * Where secrets are read from and files are written to: only the layers a project cannot write
 * may set these, so a project's file cannot make the extension read another one-line secret as its
 * token, append its journal to any file, or send the token to another socket.
 */
const USER_ONLY_KEYS: readonly (readonly string[])[] = [["token"], ["tokenFile"], ["command", "journal"], ["sink", "tokenFile"], ["sink", "socket"]];

function hasKey(value: Json, path: readonly string[]): boolean {
  let node: unknown = value;
  for (const key of path) {
    if (node === null || typeof node !== "object" || !(key in node)) return false;
    node = (node as Record<string, unknown>)[key];
  }
  return true;
}

/**
 * Layers, lowest first: built-in defaults < legacy `config.json` in the extension's source folder <
 * the stable user config `<agentDir>/extension-data/anon-notify/config.json` < the trusted project
 * config `<cwd>/.pi/anon-notify.json` < ANON_NOTIFY_* environment variables.
 *
 * Trust rule: the project file is read only when the layers the project cannot write (defaults,
 * legacy, user) set `projectConfig: true` AND Pi trusts the folder. A project can never trust
 * itself, so a `projectConfig` key inside the project file is an error, and no environment
 * variable sets it. This matters because a project's file could otherwise redirect `endpoint` and
 * with it the bearer token.
 *
 * Any bad layer makes the whole result `ok: false` with every problem listed: the extension then
 * stays inactive rather than half-working.
 */
export function loadConfig(options: LoadConfigOptions): LoadConfigResult {
  const home = homedir();
  const agentDir = options.agentDir ?? agentDirFrom(options.env, home);
  // The package root: where the old single-folder extension kept its config.json.
  const legacyDir = options.legacyDir ?? fileURLToPath(new URL("../../", import.meta.url));
  const files: ConfigFileInfo[] = [];
  const errors: string[] = [];
  const warnings: string[] = [];
  let merged = DEFAULT_CONFIG as unknown as Json;
  const origins: Record<string, ConfigOrigin> = {};
  let language: Language | undefined;

  const applyFile = (layer: ConfigLayer, path: string, check?: (value: Json) => string[]) => {
    const read = readLayerFile(path);
    if (read.status === "missing") return files.push({ layer, path, status: "missing" });
    if (read.status === "invalid") {
      errors.push(read.error);
      return files.push({ layer, path, status: "invalid" });
    }
    if (isLanguage(read.value.language)) language = read.value.language;
    const problems = [...(check?.(read.value) ?? []), ...layerProblems(read.value, `配置文件 ${path}`)];
    errors.push(...problems);
    files.push({ layer, path, status: problems.length > 0 ? "invalid" : "loaded" });
    if (problems.length > 0) return;
    merged = deepMerge(merged, read.value);
    for (const key of leafPaths(read.value)) origins[key] = { layer, where: path };
  };

  const legacyPath = join(legacyDir, "config.json");
  applyFile("legacy", legacyPath);
  if (files.at(-1)?.status === "loaded") {
    warnings.push(`正在使用旧源码目录配置 ${legacyPath}，请迁移到 ${join(dataDirFor(agentDir), "config.json")} (legacy config location)`);
  }
  applyFile("user", join(dataDirFor(agentDir), "config.json"));

  const projectPath = join(options.cwd, ".pi", "anon-notify.json");
  const allowedByUser = merged.projectConfig === true;
  if (allowedByUser && options.projectTrusted === true) {
    applyFile("project", projectPath, (value) => [
      ...("projectConfig" in value ? [`配置文件 ${projectPath}: 项目配置不能设置 projectConfig (a project cannot trust itself)`] : []),
      ...USER_ONLY_KEYS.filter((path) => hasKey(value, path)).map(
        (path) => `配置文件 ${projectPath}: 项目配置不能设置 ${path.join(".")}（Token 从哪里读、文件写到哪里只由用户配置决定） (a project cannot choose where secrets are read or files written)`,
      ),
      ...approvalWeakening(value).map((key) => `配置文件 ${projectPath}: 项目配置不能放宽审批（approval.${key}）(a project can only switch approvals on)`),
    ]);
  } else if (readLayerFile(projectPath).status !== "missing") {
    files.push({ layer: "project", path: projectPath, status: "skipped" });
    warnings.push(
      allowedByUser
        ? `项目配置 ${projectPath} 未读取：Pi 未信任此项目 (project not trusted by Pi)`
        : `项目配置 ${projectPath} 未读取：用户配置未开启 projectConfig (projectConfig is off)`,
    );
  }

  const env = envLayer(options.env);
  errors.push(...env.errors);
  merged = deepMerge(merged, env.layer);
  for (const [key, name] of Object.entries(env.names)) origins[key] = { layer: "env", where: name };

  if (errors.length > 0) return { ok: false, errors, files, ...(language ? { language } : {}) };
  // Every layer passed on its own, so the merge of valid sections is valid too; parse to type it.
  const { config, warnings: legacyWarnings } = normaliseLegacy(Config.parse(merged));
  return { ok: true, config: resolvePaths(config, dataDirFor(agentDir), home), files, warnings: [...warnings, ...legacyWarnings], origins };
}

/** A project file may switch approvals on, never weaken what the user set (its rules would replace the user's). */
function approvalWeakening(value: Json): string[] {
  const approval = value.approval;
  if (!isPlainObject(approval)) return [];
  return Object.entries(approval)
    .filter(([key, setting]) => !(key === "enabled" && setting === true))
    .map(([key]) => key);
}

const QQ_NUMBER = /^[1-9]\d{4,11}$/;
/** Why `/anon-notify` must refuse to enable with this recipient, in Chinese; undefined when fine. */
export function recipientProblem(config: Pick<Config, "recipient">): string | undefined {
  const { qq: target, anonQq } = config.recipient;
  if (!target) return "未配置目标 QQ（recipient.qq）";
  if (!QQ_NUMBER.test(target)) return `目标 QQ（recipient.qq）无效：应为 5–12 位数字，实际为 "${target}"`;
  if (!anonQq) return "未配置 Anon 的 QQ（recipient.anonQq）";
  if (!QQ_NUMBER.test(anonQq)) return `Anon 的 QQ（recipient.anonQq）无效：应为 5–12 位数字，实际为 "${anonQq}"`;
  if (target === anonQq) return "目标 QQ 与 Anon 的 QQ 相同，Anon 不能通知自己";
  return undefined;
}

/**
 * The bearer token: ANON_NOTIFY_TOKEN > inline `token` > `tokenFile`, trimmed; undefined when none
 * is set or the file is missing or empty. Throws (naming the file, never its content) when the
 * file exists but cannot be read, so a permissions mistake is not mistaken for "no token".
 */
export function readToken(config: Pick<Config, "token" | "tokenFile">, env: NodeJS.ProcessEnv): string | undefined {
  const fromEnv = env.ANON_NOTIFY_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  if (config.token) return config.token;
  try {
    return readFileSync(config.tokenFile, "utf8").trim() || undefined;
  } catch (error) {
    if (isMissingFile(error)) return undefined;
    throw new Error(`Token 文件 ${config.tokenFile} 无法读取 (token file unreadable): ${(error as NodeJS.ErrnoException).code ?? "error"}`);
  }
}

/** Fills `{project}` `{cwd}` `{sessionId}` `{model}` `{mode}`; an unknown value renders empty. */
export function renderSource(template: string, vars: SourceVariables): string {
  return template.replace(/\{(project|cwd|sessionId|model|mode)\}/g, (_, name: keyof SourceVariables) => vars[name] ?? "");
}

