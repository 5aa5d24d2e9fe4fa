/** The configuration, loaded in layers (defaults < legacy < user < trusted project < environment), each
 * checked on its own. Files are never written: legacy keys are normalised in memory only. */
import { readFileSync } from "node:fs";
import { homedir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { errorText, isMissingFile } from "../../common/errors.ts";
import { isLanguage, localeLanguage, messagesFor, type Language, type Messages } from "../texts/messages.ts";
import { deepMerge, isPlainObject, type Json, layerProblems, leafPaths, type Problem, withoutKey } from "./layer-rules.ts";
import { Config, DEFAULT_CONFIG, type SourceVariables } from "./schema-rules.ts";

/** Pi's agent folder, as Pi's own `getAgentDir()` finds it but from an injected environment. */
export function agentDirFrom(env: NodeJS.ProcessEnv, home: string = homedir()): string {
  const fromEnv = env.PI_CODING_AGENT_DIR;
  return fromEnv ? expandHome(fromEnv, home) : join(home, ".pi", "agent");
}

/** This extension's own folder under Pi's agent folder: user config, token, outbox, journal. */
export function dataDirFor(agentDir: string): string {
  return join(agentDir, "extension-data", "anon-notify");
}

export function expandHome(path: string, home: string = homedir()): string {
  if (path === "~") return home;
  return path.startsWith("~/") ? join(home, path.slice(2)) : path;
}

/** Legacy values, normalised in memory only: `command.deliveryWhenBusy: "followUp"` becomes `"steer"`,
 * `content.includeModel/includeDuration/includeToolCounts` become false; `notify.cancelled` and `command.maxBatchSize` are read and have no effect. */
export function normaliseLegacy(config: Config, m: Messages): { config: Config; warnings: string[] } {
  const t = m.config;
  const warnings: string[] = [];
  const command = { ...config.command };
  if (command.deliveryWhenBusy === "followUp") {
    command.deliveryWhenBusy = "steer";
    warnings.push(t.legacyFollowUp);
  }
  const content = { ...config.content };
  for (const key of ["includeModel", "includeDuration", "includeToolCounts"] as const) {
    if (content[key] === true) warnings.push(t.legacyContent(key));
    if (content[key] !== undefined) content[key] = false;
  }
  if (config.notify.cancelled !== undefined) warnings.push(t.legacyCancelled);
  if (command.maxBatchSize !== undefined) warnings.push(t.legacyBatch);
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
export type ConfigOrigin = { layer: ConfigLayer | "env"; where: string };
/** `language`: the newest valid `language` any layer asked for (even an otherwise invalid layer's, so its errors are shown in it), else the locale's. */
export type LoadConfigResult =
  | { ok: true; config: Config; files: ConfigFileInfo[]; warnings: string[]; origins: Record<string, ConfigOrigin>; language: Language }
  | { ok: false; errors: string[]; files: ConfigFileInfo[]; language: Language };

export interface LoadConfigOptions {
  cwd: string;
  env: NodeJS.ProcessEnv;
  agentDir?: string;
  /** The extension's source folder holding the legacy `config.json`; defaults to this file's folder. */
  legacyDir?: string;
  /** Pi's own verdict on the project folder (`ctx.isProjectTrusted()`); defaults to false. */
  projectTrusted?: boolean;
}

/** `ANON_NOTIFY_<name>=key.path`; the `enabled` switches read as booleans, the rest as strings. */
const ENV_KEYS =
  "ENABLED=enabled ENDPOINT=endpoint TOKEN=token SOURCE=source RECIPIENT_QQ=recipient.qq ANON_QQ=recipient.anonQq SINK_ENABLED=sink.enabled SINK_SOCKET=sink.socket SINK_TOKEN_FILE=sink.tokenFile"
    .split(" ")
    .map((pair) => pair.split("="))
    .map(([name, key]) => ({ name: `ANON_NOTIFY_${name}`, path: key!.split("."), boolean: key!.endsWith("enabled") }));
const ENV_TRUE = new Set(["1", "true", "yes", "on"]);
const ENV_FALSE = new Set(["0", "false", "no", "off"]);

type ReadOutcome = { status: "missing" } | { status: "loaded"; value: Json } | { status: "invalid"; error: Problem };
function readLayerFile(path: string): ReadOutcome {
  let text: string;
  try {
    text = readFileSync(path, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return { status: "missing" };
    return { status: "invalid", error: (m) => m.config.unreadable(path, errorText(error)) };
  }
  try {
    const value: unknown = JSON.parse(text);
    if (!isPlainObject(value)) return { status: "invalid", error: (m) => m.config.notObject(path) };
    // Where an editor finds config.schema.json, not a setting.
    delete value.$schema;
    return { status: "loaded", value };
  } catch (error) {
    return { status: "invalid", error: (m) => m.config.notJson(path, errorText(error)) };
  }
}

function envLayer(env: NodeJS.ProcessEnv): { layer: Json; errors: Problem[]; names: Record<string, string> } {
  let layer: Json = {};
  const errors: Problem[] = [];
  const names: Record<string, string> = {};
  for (const { name, path, boolean } of ENV_KEYS) {
    const raw = env[name];
    // An empty variable counts as unset, as Pi treats an empty PI_CODING_AGENT_DIR.
    if (raw === undefined || raw === "") continue;
    let value: unknown = raw;
    if (boolean) {
      const lower = raw.trim().toLowerCase();
      if (!ENV_TRUE.has(lower) && !ENV_FALSE.has(lower)) {
        errors.push((m) => m.config.envBoolean(name, JSON.stringify(raw)));
        continue;
      }
      value = ENV_TRUE.has(lower);
    }
    const single = path.reduceRight<unknown>((inner, key) => ({ [key]: inner }), value) as Json;
    const problems = layerProblems(single, (m) => m.config.env(name));
    if (problems.length > 0) errors.push(...problems);
    else {
      layer = deepMerge(layer, single);
      names[path.join(".")] = name;
    }
  }
  return { layer, errors, names };
}

function resolvePaths(config: Config, dataDir: string): Config {
  const socket = expandHome(config.sink.socket);
  const resolve = (path: string) => expandHome(path.replace("{dataDir}", dataDir).replace("{socketDir}", dirname(socket)));
  return {
    ...config,
    tokenFile: resolve(config.tokenFile),
    command: { ...config.command, journal: resolve(config.command.journal) },
    sink: { ...config.sink, socket, tokenFile: resolve(config.sink.tokenFile) },
  };
}

/** Where secrets are read from, where the token is sent and where files are written: only layers a project cannot write may set these, so a project's
 * file cannot redirect the bearer token or a journal. A project file naming one is warned about and those keys ignored. */
const USER_ONLY_KEYS = "endpoint token tokenFile command.journal sink.tokenFile sink.socket".split(" ").map((key) => key.split("."));

/** Layers, lowest first: defaults < legacy `config.json` < `<agentDir>/extension-data/anon-notify/config.json` < `<cwd>/.pi/anon-notify.json` <
 * ANON_NOTIFY_*. The project file is read only when a layer it cannot write sets `projectConfig: true` and Pi trusts the folder. Any bad layer makes the
 * result `ok: false`. */
export function loadConfig(options: LoadConfigOptions): LoadConfigResult {
  const dataDir = dataDirFor(options.agentDir ?? agentDirFrom(options.env));
  const files: ConfigFileInfo[] = [];
  const errors: Problem[] = [];
  const warnings: Problem[] = [];
  let merged = DEFAULT_CONFIG as unknown as Json;
  const origins: Record<string, ConfigOrigin> = {};
  let language: Language | undefined;

  const applyFile = (layer: ConfigLayer, path: string, check?: (value: Json) => Problem[], ignored: readonly (readonly string[])[] = []) => {
    const read = readLayerFile(path);
    if (read.status === "missing") return files.push({ layer, path, status: "missing" });
    if (read.status === "invalid") {
      errors.push(read.error);
      return files.push({ layer, path, status: "invalid" });
    }
    if (isLanguage(read.value.language)) language = read.value.language;
    let value = read.value;
    for (const key of ignored) {
      const without = withoutKey(value, key);
      if (without !== value) warnings.push((m) => m.config.userOnly(path, key.join(".")));
      value = without;
    }
    const problems = [...(check?.(value) ?? []), ...layerProblems(value, (m) => m.config.file(path))];
    errors.push(...problems);
    files.push({ layer, path, status: problems.length > 0 ? "invalid" : "loaded" });
    if (problems.length > 0) return;
    merged = deepMerge(merged, value);
    for (const key of leafPaths(value)) origins[key] = { layer, where: path };
  };

  // The package root by default: where the old single-folder extension kept its config.json.
  const legacyPath = join(options.legacyDir ?? fileURLToPath(new URL("../../", import.meta.url)), "config.json");
  applyFile("legacy", legacyPath);
  if (files.at(-1)?.status === "loaded") {
    warnings.push((m) => m.config.legacyLocation(legacyPath, join(dataDir, "config.json")));
  }
  applyFile("user", join(dataDir, "config.json"));

  const projectPath = join(options.cwd, ".pi", "anon-notify.json");
  const allowedByUser = merged.projectConfig === true;
  if (allowedByUser && options.projectTrusted === true) {
    applyFile(
      "project",
      projectPath,
      (value) => [
        ...("projectConfig" in value ? [(m: Messages) => m.config.selfTrust(projectPath)] : []),
        ...approvalWeakening(value).map((key) => (m: Messages) => m.config.weakensApproval(projectPath, key)),
      ],
      USER_ONLY_KEYS,
    );
  } else if (readLayerFile(projectPath).status !== "missing") {
    files.push({ layer: "project", path: projectPath, status: "skipped" });
    warnings.push((m) => (allowedByUser ? m.config.projectUntrusted(projectPath) : m.config.projectConfigOff(projectPath)));
  }

  const env = envLayer(options.env);
  errors.push(...env.errors);
  merged = deepMerge(merged, env.layer);
  for (const [key, name] of Object.entries(env.names)) origins[key] = { layer: "env", where: name };

  const chosen = language ?? localeLanguage(options.env);
  const m = messagesFor(chosen);
  if (errors.length > 0) return { ok: false, errors: errors.flatMap((problem) => problem(m)), files, language: chosen };
  // Every layer passed on its own, so the merge of valid sections is valid too; parse to type it.
  const { config, warnings: legacyWarnings } = normaliseLegacy(Config.parse(merged), m);
  return {
    ok: true,
    config: resolvePaths(config, dataDir),
    files,
    warnings: [...warnings.flatMap((warning) => warning(m)), ...legacyWarnings],
    origins,
    language: chosen,
  };
}

/** A project file may switch approvals on, never weaken what the user set (its rules would replace the user's). */
function approvalWeakening(value: Json): string[] {
  return Object.entries(isPlainObject(value.approval) ? value.approval : {}).flatMap(([key, setting]) => (key === "enabled" && setting === true ? [] : [key]));
}

const QQ_NUMBER = /^[1-9]\d{4,11}$/;
/** Why `/anon-notify` must refuse to enable with this recipient, in the session's language; undefined when fine. */
export function recipientProblem(config: Pick<Config, "recipient">, m: Messages): string | undefined {
  const { qq: target, anonQq } = config.recipient;
  const t = m.config;
  if (!target) return t.noQq;
  if (!QQ_NUMBER.test(target)) return t.badQq(target);
  if (!anonQq) return t.noAnonQq;
  if (!QQ_NUMBER.test(anonQq)) return t.badAnonQq(anonQq);
  if (target === anonQq) return t.sameQq;
  return undefined;
}

/** The bearer token: ANON_NOTIFY_TOKEN > inline `token` > `tokenFile`, trimmed; undefined when none. Throws (naming the file, never its content) when the
 * file exists but cannot be read, so a permissions mistake is not taken for "no token". */
export function readToken(config: Pick<Config, "token" | "tokenFile">, env: NodeJS.ProcessEnv, m: Messages): string | undefined {
  const fromEnv = env.ANON_NOTIFY_TOKEN?.trim();
  if (fromEnv) return fromEnv;
  if (config.token) return config.token;
  try {
    return readFileSync(config.tokenFile, "utf8").trim() || undefined;
  } catch (error) {
    if (isMissingFile(error)) return undefined;
    throw new Error(m.config.tokenUnreadable(config.tokenFile, (error as NodeJS.ErrnoException).code ?? "error"));
  }
}

/** Fills `{project}` `{cwd}` `{sessionId}` `{model}` `{mode}`; an unknown value renders empty. */
export function renderSource(template: string, vars: SourceVariables): string {
  return template.replace(/\{(project|cwd|sessionId|model|mode)\}/g, (_, name: keyof SourceVariables) => vars[name] ?? "");
}
