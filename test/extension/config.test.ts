import { test, after } from "node:test";
import assert from "node:assert/strict";
import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { homedir, tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import {
  agentDirFrom,
  dataDirFor,
  loadConfig,
  normaliseLegacy,
  readToken,
  recipientProblem,
  renderSource,
  type LoadConfigOptions,
} from "../../extension/config/config.ts";
import { didYouMean, editDistance } from "../../extension/config/layer-rules.ts";
import { Config, DEFAULT_CONFIG, sinkSocketProblem } from "../../extension/config/schema-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";

const zh = messagesFor("zh-CN");
const en = messagesFor("en-US");
const ENGLISH: NodeJS.ProcessEnv = { LANG: "en_US.UTF-8" };

const roots: string[] = [];
after(() => {
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

/** A fresh agent folder, legacy source folder and project folder, with helpers to write each layer. */
function fixture() {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-config-"));
  roots.push(root);
  const paths = {
    agentDir: join(root, "agent"),
    legacyDir: join(root, "src"),
    cwd: join(root, "project"),
  };
  const files = {
    legacy: join(paths.legacyDir, "config.json"),
    user: join(dataDirFor(paths.agentDir), "config.json"),
    project: join(paths.cwd, ".pi", "anon-notify.json"),
  };
  const write = (layer: keyof typeof files, value: unknown) => {
    mkdirSync(dirname(files[layer]), { recursive: true });
    writeFileSync(files[layer], typeof value === "string" ? value : JSON.stringify(value));
  };
  const load = (extra: Partial<LoadConfigOptions> = {}) => loadConfig({ ...paths, env: {}, projectTrusted: true, ...extra });
  return { root, paths, files, write, load };
}

function loaded(result: ReturnType<typeof loadConfig>): Config {
  assert.ok(result.ok, `expected ok, got ${JSON.stringify(result)}`);
  return result.config;
}

function failed(result: ReturnType<typeof loadConfig>): string[] {
  assert.ok(!result.ok, "expected the load to fail");
  return result.errors;
}

test("the defaults satisfy the schema and carry the specified values", () => {
  assert.deepEqual(Config.parse(DEFAULT_CONFIG), DEFAULT_CONFIG);
  assert.equal(DEFAULT_CONFIG.endpoint, "http://127.0.0.1:5140/api/agent-notify/v1/events");
  assert.equal(DEFAULT_CONFIG.source, "Pi Agent · {project}");
  assert.deepEqual(DEFAULT_CONFIG.recipient, { qq: "", anonQq: "" });
  assert.equal(DEFAULT_CONFIG.delivery.timeoutMs, 12_000);
  assert.equal(DEFAULT_CONFIG.delivery.maxAttempts, 3);
  assert.equal(DEFAULT_CONFIG.delivery.outboxMaxAgeMs, 7 * 24 * 3600_000);
  assert.equal(DEFAULT_CONFIG.command.deliveryWhenBusy, "steer");
  assert.equal(DEFAULT_CONFIG.command.longPollMs, 25_000);
  assert.deepEqual(DEFAULT_CONFIG.presence, { heartbeatIntervalMs: 10_000 });
  assert.equal(DEFAULT_CONFIG.sink.enabled, false);
  assert.ok(Object.values(DEFAULT_CONFIG.sink.events).every((on) => on === true));
  assert.equal(DEFAULT_CONFIG.progressTool.enabled, false);
  assert.equal(DEFAULT_CONFIG.projectConfig, false);
});

test("with no files and no environment the defaults load, paths resolved under the agent folder", () => {
  const f = fixture();
  const result = f.load();
  const config = loaded(result);
  assert.equal(config.tokenFile, join(f.paths.agentDir, "extension-data", "anon-notify", "token"));
  assert.equal(config.command.journal, join(f.paths.agentDir, "extension-data", "anon-notify", "commands.jsonl"));
  assert.equal(config.sink.tokenFile, join(dirname(config.sink.socket), "notify.token"));
  assert.ok(!config.sink.socket.startsWith("~"));
  assert.ok(result.ok && result.warnings.length === 0);
  assert.deepEqual(
    result.files.map((file) => [file.layer, file.status]),
    [
      ["legacy", "missing"],
      ["user", "missing"],
    ],
  );
});

test("config.example.json is valid and names every key of the defaults except the per-platform socket paths", () => {
  const examplePath = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "config.example.json");
  const example = JSON.parse(readFileSync(examplePath, "utf8"));
  const f = fixture();
  f.write("user", example);
  const config = loaded(f.load());
  assert.equal(config.endpoint, DEFAULT_CONFIG.endpoint);

  const keys = (value: unknown, prefix = ""): string[] =>
    typeof value === "object" && value !== null ? Object.entries(value).flatMap(([k, v]) => keys(v, `${prefix}${k}.`)) : [prefix.slice(0, -1)];
  const platformSpecific = ["sink.socket", "sink.tokenFile"];
  assert.equal(example.$schema, "./config.schema.json", "editors find the schema beside it");
  delete example.$schema;
  assert.deepEqual(
    keys(example).sort(),
    keys(DEFAULT_CONFIG)
      .filter((k) => !platformSpecific.includes(k))
      .sort(),
  );
});

test("layers merge in the specified order: defaults < legacy < user < project < environment", () => {
  const f = fixture();
  f.write("legacy", { source: "legacy", endpoint: "http://legacy.test/api/agent-notify/v1/events", notify: { started: true }, mainAgentOnly: false });
  f.write("user", { source: "user", endpoint: "http://user.test/api/agent-notify/v1/events", projectConfig: true, notify: { toolError: true } });
  f.write("project", { source: "project", notify: { progress: true } });
  const result = f.load({ env: { ANON_NOTIFY_SOURCE: "env" } });
  const config = loaded(result);
  assert.equal(config.source, "env");
  assert.equal(config.endpoint, "http://user.test/api/agent-notify/v1/events");
  assert.equal(config.mainAgentOnly, false, "a key only the legacy file sets survives");
  // Sections merge key by key across all layers.
  assert.deepEqual(config.notify, { started: true, progress: true, completed: true, failed: true, toolError: true });
  assert.deepEqual(
    result.files.map((file) => [file.layer, file.status]),
    [
      ["legacy", "loaded"],
      ["user", "loaded"],
      ["project", "loaded"],
    ],
  );
  assert.ok(result.ok && result.warnings.some((w) => w.includes(f.files.legacy)), "the legacy location is named in a warning");
});

test("every environment variable overrides its key", () => {
  const cases: [string, string, (c: Config) => unknown, unknown][] = [
    ["ANON_NOTIFY_ENABLED", "false", (c) => c.enabled, false],
    ["ANON_NOTIFY_ENABLED", "0", (c) => c.enabled, false],
    ["ANON_NOTIFY_ENABLED", "YES", (c) => c.enabled, true],
    ["ANON_NOTIFY_ENDPOINT", "https://bot.example/api/agent-notify/v1/events", (c) => c.endpoint, "https://bot.example/api/agent-notify/v1/events"],
    ["ANON_NOTIFY_TOKEN", "  s3cret  ", (c) => c.token, "s3cret"],
    ["ANON_NOTIFY_SOURCE", "Pi · {model}", (c) => c.source, "Pi · {model}"],
    ["ANON_NOTIFY_RECIPIENT_QQ", "123456789", (c) => c.recipient.qq, "123456789"],
    ["ANON_NOTIFY_ANON_QQ", "987654321", (c) => c.recipient.anonQq, "987654321"],
    ["ANON_NOTIFY_SINK_ENABLED", "on", (c) => c.sink.enabled, true],
    ["ANON_NOTIFY_SINK_SOCKET", "/run/app/n.sock", (c) => [c.sink.socket, c.sink.tokenFile], ["/run/app/n.sock", "/run/app/notify.token"]],
    ["ANON_NOTIFY_SINK_TOKEN_FILE", "/etc/app/token", (c) => c.sink.tokenFile, "/etc/app/token"],
  ];
  const f = fixture();
  f.write("user", { enabled: true, sink: { enabled: false } });
  for (const [name, value, pick, expected] of cases) {
    assert.deepEqual(pick(loaded(f.load({ env: { [name]: value } }))), expected, `${name}=${value}`);
  }
});

test("bad environment values are errors that name the variable", () => {
  const cases: [string, string][] = [
    ["ANON_NOTIFY_ENABLED", "maybe"],
    ["ANON_NOTIFY_ENDPOINT", "not a url"],
    ["ANON_NOTIFY_ENDPOINT", "ftp://host/x"],
    ["ANON_NOTIFY_TOKEN", "   "],
    ["ANON_NOTIFY_SOURCE", "{secret}"],
    ["ANON_NOTIFY_SINK_ENABLED", "2"],
    ["ANON_NOTIFY_SINK_SOCKET", "relative.sock"],
    ["ANON_NOTIFY_SINK_TOKEN_FILE", "token"],
  ];
  const f = fixture();
  for (const [name, value] of cases) {
    const errors = failed(f.load({ env: { [name]: value } }));
    assert.equal(errors.length, 1, `${name}=${value}: ${errors.join("; ")}`);
    assert.match(errors[0]!, new RegExp(name), `${name}=${value}`);
  }
  assert.ok(f.load({ env: { ANON_NOTIFY_ENABLED: "" } }).ok, "an empty variable counts as unset");
});

test("a sink socket that looks like a network address is rejected with a clear reason", () => {
  const rejected = ["http://127.0.0.1:8080", "https://pet.example/event", "tcp://localhost:9", "tcp:localhost:9", "localhost:9000", "unix:///tmp/x.sock"];
  for (const socket of rejected) {
    const problem = sinkSocketProblem(socket);
    assert.ok(problem === "socketUrl" || problem === "socketHostPort", socket);
    const f = fixture();
    f.write("user", { sink: { socket } });
    assert.deepEqual(failed(f.load()), [`配置文件 ${f.files.user}：sink.socket 无效：${zh.config.check[problem]}`]);
    assert.deepEqual(failed(f.load({ env: ENGLISH })), [`config file ${f.files.user}: sink.socket is invalid: ${en.config.check[problem]}`]);
  }
  for (const socket of ["/tmp/pet/notify.sock", "~/Library/Application Support/VPet/notify.sock", "\\\\.\\pipe\\vpet-notify"]) {
    assert.equal(sinkSocketProblem(socket), undefined, socket);
  }
});

test("legacy keys are read, type-checked and normalised without rewriting the file", () => {
  const f = fixture();
  const legacy = {
    notify: { cancelled: true },
    command: { deliveryWhenBusy: "followUp", maxBatchSize: 5 },
    content: { includeModel: true, includeDuration: true, includeToolCounts: false },
  };
  f.write("user", legacy);
  const before = readFileSync(f.files.user, "utf8");
  const result = f.load();
  const config = loaded(result);
  assert.equal(config.command.deliveryWhenBusy, "steer");
  assert.equal(config.command.maxBatchSize, 5);
  assert.equal(config.notify.cancelled, true, "kept readable");
  assert.equal(config.content.includeModel, false);
  assert.equal(config.content.includeDuration, false);
  assert.equal(config.content.includeToolCounts, false);
  assert.equal(readFileSync(f.files.user, "utf8"), before, "the user's file is untouched");
  assert.ok(result.ok);
  for (const key of ["deliveryWhenBusy", "includeModel", "includeDuration", "notify.cancelled", "maxBatchSize"]) {
    assert.ok(
      result.warnings.some((w) => w.includes(key)),
      `a warning mentions ${key}`,
    );
  }

  const badTypes: [unknown, string][] = [
    [{ content: { includeModel: "yes" } }, "content.includeModel"],
    [{ content: { includeDuration: 1 } }, "content.includeDuration"],
    [{ content: { includeToolCounts: null } }, "content.includeToolCounts"],
    [{ notify: { cancelled: "no" } }, "notify.cancelled"],
    [{ command: { maxBatchSize: 0 } }, "command.maxBatchSize"],
    [{ command: { deliveryWhenBusy: "queue" } }, "command.deliveryWhenBusy"],
  ];
  for (const [layer, key] of badTypes) {
    const g = fixture();
    g.write("user", layer);
    const errors = failed(g.load());
    assert.ok(
      errors.some((e) => e.includes(g.files.user) && e.includes(key)),
      `${key}: ${errors.join("; ")}`,
    );
  }
});

test("normaliseLegacy is pure: it leaves its input alone and a modern config unchanged", () => {
  const input = Config.parse({ ...DEFAULT_CONFIG, command: { ...DEFAULT_CONFIG.command, deliveryWhenBusy: "followUp" } });
  const { config, warnings } = normaliseLegacy(input, en);
  assert.equal(input.command.deliveryWhenBusy, "followUp");
  assert.equal(config.command.deliveryWhenBusy, "steer");
  assert.deepEqual(warnings, ['command.deliveryWhenBusy: the old value "followUp" is treated as "steer"']);
  assert.deepEqual(normaliseLegacy(input, zh).warnings, ['command.deliveryWhenBusy 的旧值 "followUp" 已按 "steer" 处理']);
  assert.deepEqual(normaliseLegacy(DEFAULT_CONFIG, zh), { config: DEFAULT_CONFIG, warnings: [] });
});

test("every numeric limit accepts its bounds and rejects one step beyond, naming file and key", () => {
  const limits: [string, number, number][] = [
    ["content.maxTaskChars", 1, 200],
    ["content.maxSummaryChars", 1, 1200],
    ["delivery.timeoutMs", 100, 120_000],
    ["delivery.maxAttempts", 1, 10],
    ["delivery.backoffMs", 0, 60_000],
    ["delivery.minIntervalMs", 0, 86_400_000],
    ["delivery.outboxMaxAgeMs", 60_000, 90 * 86_400_000],
    ["progress.firstAfterMs", 1000, 86_400_000],
    ["progress.intervalMs", 1000, 86_400_000],
    ["progress.toolCountThreshold", 1, 100_000],
    ["progress.errorCooldownMs", 0, 86_400_000],
    ["command.idlePollIntervalMs", 100, 3_600_000],
    ["command.longPollMs", 0, 25_000],
    ["command.maxBatchSize", 1, 100],
    ["presence.heartbeatIntervalMs", 1000, 300_000],
    ["presence.heartbeatTimeoutMs", 1000, 3_600_000],
  ];
  const layerFor = (key: string, value: unknown) => {
    const [section, field] = key.split(".") as [string, string];
    return { [section]: { [field]: value } };
  };
  for (const [key, min, max] of limits) {
    for (const [value, ok] of [
      [min, true],
      [max, true],
      [min - 1, false],
      [max + 1, false],
      [min + 0.5, false],
    ] as [number, boolean][]) {
      const f = fixture();
      f.write("user", layerFor(key, value));
      const result = f.load();
      assert.equal(result.ok, ok, `${key}=${value}`);
      if (!result.ok)
        assert.ok(
          result.errors.some((e) => e.includes(f.files.user) && e.includes(key)),
          `${key}=${value}: ${result.errors}`,
        );
    }
  }
});

test("bad values and unknown keys are reported with their file and key path, from every layer at once", () => {
  const f = fixture();
  f.write("legacy", { notify: { complete: true } });
  f.write("user", { delivery: { timeoutMs: "12s" }, projectConfig: true, surprise: 1 });
  f.write("project", { recipient: { qq: 123456 } });
  const errors = failed(f.load());
  const expect: [string, string][] = [
    [f.files.legacy, "notify.complete"],
    [f.files.user, "delivery.timeoutMs"],
    [f.files.user, "surprise"],
  ];
  for (const [file, key] of expect)
    assert.ok(
      errors.some((e) => e.includes(file) && e.includes(key)),
      `${file} ${key}: ${errors.join("\n")}`,
    );
  // The user layer is invalid, so its projectConfig never took effect and the project file was not read.
  assert.ok(!errors.some((e) => e.includes(f.files.project)));
});

test("malformed and unreadable files are errors, not silently skipped", () => {
  const cases: [string, RegExp, RegExp][] = [
    ["{ not json", /不是有效的 JSON/, /is not valid JSON/],
    ["[1, 2]", /顶层必须是 JSON 对象/, /must be a JSON object/],
    ["", /不是有效的 JSON/, /is not valid JSON/],
  ];
  for (const [text, chinese, english] of cases) {
    const f = fixture();
    f.write("user", text);
    assert.match(failed(f.load({ env: ENGLISH }))[0]!, english);
    const result = f.load();
    const errors = failed(result);
    assert.match(errors[0]!, chinese);
    assert.ok(errors[0]!.includes(f.files.user));
    assert.deepEqual(result.files.find((file) => file.layer === "user")?.status, "invalid");
  }
  if (process.getuid?.() !== 0) {
    const f = fixture();
    f.write("user", {});
    chmodSync(f.files.user, 0o000);
    assert.match(failed(f.load())[0]!, /无法读取/);
    assert.match(failed(f.load({ env: ENGLISH }))[0]!, /cannot be read/);
  }
});

test("the project file is read only when a lower layer allows it and Pi trusts the folder", () => {
  const cases: { name: string; lower?: unknown; env?: Record<string, string>; trusted: boolean; read: boolean }[] = [
    { name: "defaults alone do not allow it", trusted: true, read: false },
    { name: "user config allows it, Pi trusts", lower: { projectConfig: true }, trusted: true, read: true },
    { name: "user config allows it, Pi does not trust", lower: { projectConfig: true }, trusted: false, read: false },
    { name: "user config refuses it", lower: { projectConfig: false }, trusted: true, read: false },
  ];
  for (const c of cases) {
    const f = fixture();
    if (c.lower) f.write("user", c.lower);
    f.write("project", { source: "from project" });
    const result = f.load({ projectTrusted: c.trusted });
    assert.equal(loaded(result).source === "from project", c.read, c.name);
    const project = result.files.find((file) => file.layer === "project");
    assert.equal(project?.status, c.read ? "loaded" : "skipped", c.name);
    if (!c.read) assert.ok(result.ok && result.warnings.some((w) => w.includes(f.files.project)), `${c.name}: the skip is reported`);
  }

  const legacyAllows = fixture();
  legacyAllows.write("legacy", { projectConfig: true });
  legacyAllows.write("project", { source: "from project" });
  assert.equal(loaded(legacyAllows.load()).source, "from project", "the legacy layer is below the project too");

  const userOverridesLegacy = fixture();
  userOverridesLegacy.write("legacy", { projectConfig: true });
  userOverridesLegacy.write("user", { projectConfig: false });
  userOverridesLegacy.write("project", { source: "from project" });
  assert.equal(loaded(userOverridesLegacy.load()).source, DEFAULT_CONFIG.source);
});

test("a project can never trust itself", () => {
  const f = fixture();
  f.write("user", { projectConfig: true });
  f.write("project", { projectConfig: true, source: "x" });
  const errors = failed(f.load());
  assert.ok(errors.some((e) => e.includes(f.files.project) && e.includes("projectConfig")));

  const selfTrusting = fixture();
  selfTrusting.write("project", { projectConfig: true, source: "x" });
  assert.equal(loaded(selfTrusting.load()).source, DEFAULT_CONFIG.source, "without the user's consent the file is not read at all");
});

test("PI_CODING_AGENT_DIR moves the user config, token and journal like Pi's getAgentDir", () => {
  const f = fixture();
  f.write("user", { source: "from PI_CODING_AGENT_DIR" });
  const env = { PI_CODING_AGENT_DIR: f.paths.agentDir };
  const config = loaded(loadConfig({ cwd: f.paths.cwd, legacyDir: f.paths.legacyDir, env }));
  assert.equal(config.source, "from PI_CODING_AGENT_DIR");
  assert.equal(config.tokenFile, join(f.paths.agentDir, "extension-data", "anon-notify", "token"));

  assert.equal(agentDirFrom({}), join(homedir(), ".pi", "agent"));
  assert.equal(agentDirFrom({ PI_CODING_AGENT_DIR: "" }), join(homedir(), ".pi", "agent"));
  assert.equal(agentDirFrom({ PI_CODING_AGENT_DIR: "~/custom" }), join(homedir(), "custom"));
  assert.equal(agentDirFrom({ PI_CODING_AGENT_DIR: "/opt/agent" }), "/opt/agent");
  assert.equal(dataDirFor("/opt/agent"), "/opt/agent/extension-data/anon-notify");
});

test("paths in the config accept ~/ and {dataDir} and reject relative paths", () => {
  const f = fixture();
  f.write("user", { tokenFile: "~/secrets/anon-token", command: { journal: "{dataDir}/j.jsonl" } });
  const config = loaded(f.load());
  assert.equal(config.tokenFile, join(homedir(), "secrets", "anon-token"));
  assert.equal(config.command.journal, join(dataDirFor(f.paths.agentDir), "j.jsonl"));

  const g = fixture();
  g.write("user", { tokenFile: "token" });
  assert.ok(failed(g.load()).some((e) => e.includes("tokenFile")));
});

test("recipientProblem explains in the person's language why a recipient cannot be used", () => {
  assert.equal(recipientProblem({ recipient: { qq: "", anonQq: "" } }, en), "the recipient's QQ (recipient.qq) is not set");
  assert.equal(
    recipientProblem({ recipient: { qq: "1234", anonQq: "" } }, en),
    'the recipient\'s QQ (recipient.qq) is invalid: expected 5–12 digits, got "1234"',
  );
  const cases: [string, string, RegExp | undefined][] = [
    ["", "", /未配置目标 QQ/],
    ["1234", "987654321", /recipient\.qq.*5–12/],
    ["1234567890123", "987654321", /recipient\.qq/],
    ["01234567", "987654321", /recipient\.qq/],
    ["12345abc", "987654321", /recipient\.qq/],
    ["123456789", "", /recipient\.anonQq/],
    ["123456789", "98765x", /recipient\.anonQq/],
    ["123456789", "123456789", /相同/],
    ["12345", "987654321", undefined],
    ["123456789012", "987654321", undefined],
  ];
  for (const [qq, anonQq, problem] of cases) {
    const result = recipientProblem({ recipient: { qq, anonQq } }, zh);
    if (problem) assert.match(result ?? "", problem, `${qq}/${anonQq}`);
    else assert.equal(result, undefined, `${qq}/${anonQq}`);
  }
});

test("readToken prefers the environment, then the inline token, then the token file, trimmed", () => {
  const f = fixture();
  const tokenFile = join(f.root, "token");
  writeFileSync(tokenFile, "  from-file\n");
  const cases: [NodeJS.ProcessEnv, string | undefined, string, string | undefined][] = [
    [{ ANON_NOTIFY_TOKEN: " from-env " }, "inline", tokenFile, "from-env"],
    [{}, "inline", tokenFile, "inline"],
    [{}, undefined, tokenFile, "from-file"],
    [{ ANON_NOTIFY_TOKEN: "" }, undefined, tokenFile, "from-file"],
    [{}, undefined, join(f.root, "absent"), undefined],
  ];
  for (const [env, token, file, expected] of cases) assert.equal(readToken({ token, tokenFile: file }, env, en), expected);

  writeFileSync(tokenFile, " \n");
  assert.equal(readToken({ tokenFile }, {}, en), undefined, "an empty file is no token");

  const folder = join(f.root, "token-dir");
  mkdirSync(folder);
  writeFileSync(tokenFile, "never-shown");
  assert.throws(
    () => readToken({ tokenFile: folder }, {}, en),
    (error: Error) => error.message === `token file ${folder} cannot be read (EISDIR)`,
  );
  assert.throws(
    () => readToken({ tokenFile: folder }, {}, zh),
    (error: Error) => error.message === `令牌文件 ${folder} 无法读取（EISDIR）`,
  );
});

test("renderSource fills every template variable", () => {
  const vars = { project: "demo", cwd: "/w/demo", sessionId: "019a", model: "faux/faux-1", mode: "interactive" };
  assert.equal(renderSource("Pi Agent · {project}", vars), "Pi Agent · demo");
  assert.equal(renderSource("{project}|{cwd}|{sessionId}|{model}|{mode}|{project}", vars), "demo|/w/demo|019a|faux/faux-1|interactive|demo");
  assert.equal(renderSource("Pi ({model})", { ...vars, model: null }), "Pi ()");
});

test("a trusted project may change how notices behave, never where the token goes, where secrets are read or files are written", () => {
  const forbidden: [string, Record<string, unknown>, (config: Config) => unknown][] = [
    ["endpoint", { endpoint: "https://evil.example/api/agent-notify/v1/events" }, (c) => c.endpoint],
    ["token", { token: "project-token" }, (c) => c.token],
    ["tokenFile", { tokenFile: "/home/me/.ssh/id_ed25519" }, (c) => c.tokenFile],
    ["command.journal", { command: { journal: "/home/me/.bashrc" } }, (c) => c.command.journal],
    ["sink.tokenFile", { sink: { tokenFile: "/etc/passwd" } }, (c) => c.sink.tokenFile],
    ["sink.socket", { sink: { socket: "/tmp/elsewhere.sock" } }, (c) => c.sink.socket],
  ];
  for (const [key, value, read] of forbidden) {
    const f = fixture();
    f.write("user", { projectConfig: true });
    const without = loaded(f.load({ projectTrusted: true }));
    f.write("project", { ...value, source: "from project", language: "en-US" });
    const result = f.load({ projectTrusted: true });
    assert.ok(result.ok, `${key}: the rest of the project file still applies`);
    assert.equal(result.config.source, "from project", key);
    assert.deepEqual(read(result.config), read(without), `${key} is ignored`);
    assert.ok(
      result.warnings.some(
        (w) =>
          w ===
          `config file ${f.files.project}: a project config cannot set ${key}; ignored (only the user's config or the environment decides where notices and the token go, where the token is read and where files are written)`,
      ),
      `${key}: ${result.warnings.join("; ")}`,
    );
  }
  const env = fixture();
  env.write("user", { projectConfig: true });
  env.write("project", { endpoint: "https://evil.example/events" });
  const fromEnv = env.load({ projectTrusted: true, env: { ANON_NOTIFY_ENDPOINT: "http://127.0.0.1:6000/api/agent-notify/v1/events" } });
  assert.ok(fromEnv.ok);
  assert.equal(fromEnv.config.endpoint, "http://127.0.0.1:6000/api/agent-notify/v1/events", "the environment still sets it");
  const allowed = fixture();
  allowed.write("user", { projectConfig: true });
  allowed.write("project", { source: "from project", notify: { toolError: true }, command: { enabled: true } });
  assert.equal(loaded(allowed.load({ projectTrusted: true })).source, "from project");
});

test("config errors are worded wholly in the person's language: zod's own words from its locale, ours from the catalogue", () => {
  const f = fixture();
  f.write("user", { delivery: { timeoutMs: "12s" } });
  assert.deepEqual(failed(f.load()), [`配置文件 ${f.files.user}：delivery.timeoutMs 无效：无效输入：期望 数字，实际接收 string`]);
  assert.deepEqual(failed(f.load({ env: ENGLISH })), [
    `config file ${f.files.user}: delivery.timeoutMs is invalid: Invalid input: expected number, received string`,
  ]);
  // The file's own language wins over the locale, for the errors of the file that set it too.
  f.write("user", { language: "en-US", tokenFile: "token", endpoint: "ftp://x" });
  assert.deepEqual(failed(f.load()).sort(), [
    `config file ${f.files.user}: endpoint is invalid: must be an http(s) URL`,
    `config file ${f.files.user}: tokenFile is invalid: must be an absolute path, or start with ~/ or {dataDir}`,
  ]);
  const g = fixture();
  g.write("user", { language: "zh-CN" });
  assert.deepEqual(failed(g.load({ env: { ...ENGLISH, ANON_NOTIFY_ENABLED: "maybe" } })), [
    '环境变量 ANON_NOTIFY_ENABLED：应为 true/false/1/0/yes/no/on/off，实际为 "maybe"',
  ]);
});

test("a mistyped config key gets a did-you-mean in the person's language, at any depth", () => {
  const cases: [unknown, string, string][] = [
    [{ langauge: "en-US" }, "未知配置项 langauge，是否想写 language？", "unknown key langauge; did you mean language?"],
    [
      { delivery: { timeoutMS: 5000 } },
      "未知配置项 delivery.timeoutMS，是否想写 delivery.timeoutMs？",
      "unknown key delivery.timeoutMS; did you mean delivery.timeoutMs?",
    ],
    [
      { approval: { rules: [{ id: "a", tool: "bash", lable: "x" }] } },
      "未知配置项 approval.rules.0.lable，是否想写 approval.rules.0.label？",
      "unknown key approval.rules.0.lable; did you mean approval.rules.0.label?",
    ],
    [{ surprise: 1 }, "未知配置项 surprise", "unknown key surprise"],
  ];
  for (const [layer, chinese, english] of cases) {
    const f = fixture();
    f.write("user", layer);
    assert.deepEqual(failed(f.load()), [`配置文件 ${f.files.user}：${chinese}`]);
    assert.deepEqual(failed(f.load({ env: ENGLISH })), [`config file ${f.files.user}: ${english}`]);
  }
});

test("didYouMean picks a close known key and stays quiet when none is close", () => {
  const keys = ["language", "endpoint", "tokenFile", "id", "tool"];
  const rows: [string, string | null][] = [
    ["langauge", "language"],
    ["Language", "language"],
    ["endpont", "endpoint"],
    ["tokenfile", "tokenFile"],
    ["ip", "id"],
    ["tol", "tool"],
    ["surprise", null],
    ["xy", null],
  ];
  for (const [typo, expected] of rows) assert.equal(didYouMean(typo, keys), expected, typo);
  assert.equal(editDistance("langauge", "language"), 1, "a swapped pair is one edit");
});
