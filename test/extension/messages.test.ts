/** The language rule, the footer text and the doctor's report: pure, table-driven. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { footerText, localeLanguage, messagesFor, type FooterState, type RecipientNote } from "../../extension/texts/messages.ts";
import { doctorReport, type DoctorFacts } from "../../extension/session/doctor.ts";
import { ServerError } from "../../extension/server-client/retry.ts";

describe("localeLanguage", () => {
  const rows: [string, NodeJS.ProcessEnv, string][] = [
    ["nothing set", {}, "zh-CN"],
    ["C.UTF-8", { LANG: "C.UTF-8" }, "zh-CN"],
    ["POSIX", { LANG: "POSIX" }, "zh-CN"],
    ["zh_CN.UTF-8", { LANG: "zh_CN.UTF-8" }, "zh-CN"],
    ["zh_TW", { LANG: "zh_TW" }, "zh-CN"],
    ["en_US.UTF-8", { LANG: "en_US.UTF-8" }, "en-US"],
    ["de_DE@euro", { LANG: "de_DE@euro" }, "en-US"],
    ["LC_MESSAGES over LANG", { LANG: "zh_CN.UTF-8", LC_MESSAGES: "en_GB.UTF-8" }, "en-US"],
    ["LC_ALL over both", { LANG: "en_US.UTF-8", LC_MESSAGES: "en_US.UTF-8", LC_ALL: "zh_CN.UTF-8" }, "zh-CN"],
    ["an empty LC_ALL counts as unset", { LC_ALL: "", LANG: "en_US.UTF-8" }, "en-US"],
  ];
  for (const [label, env, expected] of rows) test(label, () => assert.equal(localeLanguage(env), expected));
});

describe("footerText", () => {
  const zh = messagesFor("zh-CN");
  const en = messagesFor("en-US");
  const rows: [FooterState, boolean, RecipientNote | null, string, string][] = [
    ["inactive", false, null, "Anon 通知：未开启", "Anon notices: off"],
    ["active", true, "reachable", "Anon 通知：已开启 → QQ 10001（目标可达）", "Anon notices: on → QQ 10001 (recipient reachable)"],
    ["active", true, "unverified", "Anon 通知：已开启 → QQ 10001（状态未核验）", "Anon notices: on → QQ 10001 (status unverified)"],
    ["active", true, null, "Anon 通知：已开启 → QQ 10001", "Anon notices: on → QQ 10001"],
    ["misconfigured", true, null, "Anon 通知：已开启（配置无效，未生效）", "Anon notices: on (config invalid, not in effect)"],
    ["misconfigured", false, null, "Anon 通知：未开启（配置无效）", "Anon notices: off (config invalid)"],
    ["suppressed", true, null, "Anon 通知：子 Agent，已抑制", "Anon notices: subagent, suppressed"],
    ["disabled", false, null, "Anon 通知：已在配置中关闭", "Anon notices: disabled in the config"],
  ];
  for (const [state, active, note, chinese, english] of rows) {
    test(`${state}, ${active ? "on" : "off"}, note ${note}`, () => {
      assert.equal(footerText(zh, state, active, { qq: "10001", note }), chinese);
      assert.equal(footerText(en, state, active, { qq: "10001", note }), english);
    });
  }
  test("both footer notes a user may not know are explained", () => {
    for (const m of [zh, en]) for (const note of [m.notes.unverified, m.notes.unknown]) assert.ok(m.notesExplained.includes(note), note);
  });
});

/** A date and time as an English reader of this machine's zone reads it. */
const localTime = (ms: number) => new Intl.DateTimeFormat("en-US", { dateStyle: "medium", timeStyle: "medium" }).format(ms);

test("doctorReport shows where each value came from, never the token, and what each probe found", () => {
  const facts: DoctorFacts = {
    operatorTokens: [],
    configErrors: [],
    files: [
      { layer: "legacy", path: "/ext/config.json", status: "missing" },
      { layer: "user", path: "/a/config.json", status: "loaded" },
    ],
    values: [
      { key: "enabled", value: true, origin: undefined },
      { key: "endpoint", value: "http://127.0.0.1:5140/api/agent-notify/v1/events", origin: { layer: "user", where: "/a/config.json" } },
      { key: "token", value: "s3cret", origin: { layer: "env", where: "ANON_NOTIFY_TOKEN" } },
    ],
    token: { used: "env", file: "/a/token", fileState: "missing" },
    endpoint: "http://127.0.0.1:5140/api/agent-notify/v1/events",
    health: {
      kind: "ok",
      value: { ok: true, version: "0.4.0", protocol: { events: 1, commands: 2 }, capabilities: ["images"], session_heartbeat_timeout_ms: 30_000 },
    },
    recipient: { kind: "error", message: "HTTP 503 not_ready" },
    footer: "Anon notices: on → QQ 10001 (status unknown)",
    presence: { running: true, accepted: false, lastFailure: "Presence heartbeat failed: timeout" },
    commands: { enabled: true, running: true, held: null, queued: 0 },
    outbox: { kind: "ok", value: { count: 2, oldest: Date.UTC(2026, 0, 2, 3, 4, 5) } },
    lastDelivery: { eventId: "pi:s:e:completed", status: "completed", at: Date.UTC(2026, 0, 2, 3, 4, 6), ok: false, attempts: 3, error: "HTTP 503" },
    test: { kind: "ok", value: { eventId: "ext:s:doctor-1", receipt: { state: "queued", error: null }, final: false } },
  };
  const text = doctorReport(messagesFor("en-US"), facts);
  assert.equal(
    text,
    [
      "Anon notices doctor",
      "Config",
      "  user config /a/config.json: loaded",
      "  enabled = true  ← default",
      '  endpoint = "http://127.0.0.1:5140/api/agent-notify/v1/events"  ← user config /a/config.json',
      "  token = ***  ← environment ANON_NOTIFY_TOKEN",
      "Token",
      "  in use: environment variable ANON_NOTIFY_TOKEN",
      "  token file /a/token: missing",
      "Server",
      "  http://127.0.0.1:5140/api/agent-notify/v1/events reachable: version 0.4.0, protocol events 1 / commands 2",
      "  capabilities: images",
      "Recipient",
      "  cannot ask: HTTP 503 not_ready",
      "Session",
      "  state: Anon notices: on → QQ 10001 (status unknown)",
      "  presence: running, not yet accepted by the server",
      "    last failure: Presence heartbeat failed: timeout",
      "  instruction channel: running",
      "Delivery",
      `  outbox backlog: 2 (oldest ${localTime(Date.UTC(2026, 0, 2, 3, 4, 5))})`,
      `  last delivery: pi:s:e:completed (completed, ${localTime(Date.UTC(2026, 0, 2, 3, 4, 6))}) → failed (3 attempts): HTTP 503`,
      "Test notice",
      "  sent ext:s:doctor-1",
      "  receipt: queued (timed out before it was final)",
    ].join("\n"),
  );
  // A file in the old place is named as such, in each language; a missing one is not worth a line.
  const legacy = { ...facts, files: [{ layer: "legacy" as const, path: "/ext/config.json", status: "loaded" as const }] };
  assert.match(doctorReport(messagesFor("en-US"), legacy), /^ {2}config in the old place \(the extension's own folder\) \/ext\/config\.json: loaded$/m);
  assert.match(doctorReport(messagesFor("zh-CN"), legacy), /^ {2}旧位置（扩展自己的目录）的配置 \/ext\/config\.json: 已读取$/m);

  // Against npm start's log persona a context_injected receipt says the notice was only printed.
  const printed: DoctorFacts = {
    ...facts,
    health: facts.health.kind === "ok" ? { kind: "ok", value: { ...facts.health.value, notices: { route: "log", ready: true, reason: null } } } : facts.health,
    lastDelivery: { eventId: "pi:s:e:completed", status: "completed", at: 0, ok: true, state: "context_injected" },
    test: { kind: "ok", value: { eventId: "ext:s:doctor-1", receipt: { state: "context_injected", error: null }, final: true } },
  };
  for (const [language, receipt] of [
    ["en-US", "  receipt: context_injected (only printed in the server's terminal; nobody was told)"],
    ["zh-CN", "  回执：context_injected（只打印在服务端终端，没有告诉任何人）"],
  ] as const) {
    const report = doctorReport(messagesFor(language), printed).split("\n");
    assert.ok(report.includes(receipt), report.join("\n"));
    assert.ok(
      report.some((line) => line.includes("context_injected") && line.includes(messagesFor(language).doctor.printedOnly("").trim())),
      "the last delivery too",
    );
  }
});

test("the approval texts the model reads keep their outcome word and tag in both languages", () => {
  const rows: [string, (m: ReturnType<typeof messagesFor>["approvals"]) => string, RegExp][] = [
    ["ask approved", (m) => m.askResult({ outcome: "approved", via: "chat", reason: null }), /^approved — /],
    ["ask rejected", (m) => m.askResult({ outcome: "rejected", via: "terminal", reason: "no" }), /^rejected — .*no/],
    ["ask timed out", (m) => m.askResult({ outcome: "timeout", via: "timeout", reason: null }), /^timeout — /],
    ["ask with nobody present", (m) => m.askResult({ outcome: "rejected", via: "policy", reason: m.nobodyToAsk }), /^rejected — /],
    ["refused", (m) => m.refusal("rm -rf", { outcome: "rejected", via: "chat", reason: "keep it" }, 60_000), /rm -rf.*keep it.*\(rejected by the user\)$/],
    ["timed out", (m) => m.refusal("rm -rf", { outcome: "timeout", via: "timeout", reason: null }, 90_000), /rm -rf.*90.*\(approval timed out: rejected\)$/],
    ["aborted", (m) => m.refusal("rm -rf", { outcome: "rejected", via: "aborted", reason: null }, 60_000), /rm -rf.*\(approval cancelled: run aborted\)$/],
    ["changed while waiting", (m) => m.mismatch("rm -rf"), /rm -rf.*\(approval mismatch\)$/],
    ["nobody to ask", (m) => m.noPerson("rm -rf", ["rm-rf"]), /rm -rf.*rm-rf.*\(approval needs an interactive, switched-on session\)$/],
  ];
  for (const [label, text, pattern] of rows) {
    for (const language of ["zh-CN", "en-US"] as const) assert.match(text(messagesFor(language).approvals), pattern, `${label} (${language})`);
  }
  assert.doesNotMatch(rows.map(([, text]) => text(messagesFor("en-US").approvals)).join("\n"), /\p{Script=Han}/u, "the English texts hold no Chinese");
});

/** Every leaf of a catalogue by its dotted key. */
function leaves(value: unknown, prefix = ""): Map<string, unknown> {
  if (typeof value !== "object" || value === null) return new Map([[prefix, value]]);
  return new Map(Object.entries(value).flatMap(([key, inner]) => [...leaves(inner, prefix ? `${prefix}.${key}` : key)]));
}

/**
 * Which arguments a text shows: each is called with sentinels that read as text wherever a value
 * is printed (also joined, as a list would be). A throw counts as its own answer, so both
 * languages must agree on it too.
 */
function shownArguments(text: unknown): string {
  if (typeof text === "string") return [...new Set(text.match(/\{[^}]*\}/g) ?? [])].sort().join(" ");
  if (typeof text !== "function") return typeof text;
  const args = Array.from({ length: text.length }, (_, i) => Object.assign([`⟦${i}⟧`], { toString: () => `⟦${i}⟧` }));
  try {
    const out = String(text(...args));
    return `arity ${text.length}: ${[...new Set(out.match(/⟦\d+⟧/g) ?? [])].sort().join(" ")}`;
  } catch (error) {
    return `arity ${text.length}: throws ${(error as Error).name}`;
  }
}

test("both languages of the Pi catalogue have the same keys and show the same placeholders", () => {
  const [zh, en] = (["zh-CN", "en-US"] as const).map((language) => leaves(messagesFor(language)));
  assert.deepEqual([...en!.keys()].sort(), [...zh!.keys()].sort());
  for (const [key, text] of zh!) assert.equal(shownArguments(en!.get(key)), shownArguments(text), key);
});

/** Facts of a doctor run with every probe answered; each test changes what it is about. */
function doctorFacts(overrides: Partial<DoctorFacts> = {}): DoctorFacts {
  return {
    configErrors: [],
    files: [],
    values: [],
    token: { used: "file", file: "/a/token", fileState: "present" },
    operatorTokens: [],
    endpoint: "http://127.0.0.1:5140/api/agent-notify/v1/events",
    health: { kind: "ok", value: { ok: true, version: "0.5.0", protocol: { events: 1, commands: 3 }, capabilities: [], session_heartbeat_timeout_ms: 30_000 } },
    recipient: { kind: "ok", value: { qq: "10001", anon_qq: "10002", status: "ok", reason: null } },
    footer: "",
    presence: { running: true, accepted: true, lastFailure: null },
    commands: { enabled: true, running: true, held: null, queued: 0 },
    outbox: { kind: "ok", value: { count: 0, oldest: null } },
    lastDelivery: undefined,
    ...overrides,
  };
}

test("the doctor names the real cause of a failed question to the server, in both languages", () => {
  const endpoint = "http://127.0.0.1:5140/api/agent-notify/v1/events";
  // What the doctor's probe reports when nothing listens: the client's error, worded as Pi prints it in each language.
  const refused = new ServerError("GET health failed: ECONNREFUSED", {
    retryable: true,
    code: "ECONNREFUSED",
    facts: { kind: "network", request: "GET health", code: "ECONNREFUSED", detail: "connect ECONNREFUSED 127.0.0.1:5140" },
  });
  const rows: [string, (language: "zh-CN" | "en-US") => DoctorFacts["health"], string, string][] = [
    [
      "no token here",
      () => ({ kind: "error", message: "HTTP 401 unauthorized", cause: "no_token" }),
      `${endpoint} answered, but there is no token here (HTTP 401)`,
      `${endpoint} 有应答，但本机没有令牌（HTTP 401）`,
    ],
    [
      "a refused token",
      () => ({ kind: "error", message: "HTTP 401 unauthorized", cause: "token_refused" }),
      `${endpoint} refused this machine's token (HTTP 401)`,
      `${endpoint} 拒绝了本机的令牌（HTTP 401）`,
    ],
    [
      "no answer",
      (language) => ({ kind: "error", message: messagesFor(language).delivery.why(refused), cause: "no_answer" }),
      `${endpoint} did not answer (GET health failed (ECONNREFUSED)): the server is not running, or the address or port is wrong`,
      `${endpoint} 没有应答（GET health 连接失败（ECONNREFUSED））：服务端没有运行，或地址、端口不对`,
    ],
    [
      "a wrong URL",
      () => ({ kind: "error", message: "HTTP 404", cause: "not_our_server" }),
      `${endpoint} is not the notify server (HTTP 404): check the endpoint URL`,
      `${endpoint} 处不是通知服务（HTTP 404）：请检查 endpoint 网址`,
    ],
  ];
  for (const [label, health, english, chinese] of rows) {
    assert.ok(doctorReport(messagesFor("en-US"), doctorFacts({ health: health("en-US") })).includes(`Server\n  ${english}\n`), label);
    assert.ok(doctorReport(messagesFor("zh-CN"), doctorFacts({ health: health("zh-CN") })).includes(`服务端\n  ${chinese}\n`), label);
  }
});

test("the doctor shows where the server's notices go, whether it has a chat, and the last notice's receipt as it is now", () => {
  const health: DoctorFacts["health"] = {
    kind: "ok",
    value: {
      ok: true,
      version: "0.5.0",
      protocol: { events: 1, commands: 3 },
      capabilities: [],
      session_heartbeat_timeout_ms: 30_000,
      notices: { route: "none", ready: false, reason: "no_persona" },
      chat: false,
      push: {
        route: "ntfy",
        answers: "buttons",
        last: { state: "retrying", error: "ntfy_rate_limited: ntfy 限流了（HTTP 429），6 秒后重试", at: "2026-01-02T03:04:05.000Z" },
      },
    },
  };
  const facts = doctorFacts({
    health,
    recipient: { kind: "ok", value: { qq: "10001", anon_qq: "10002", status: "unknown", reason: "bot_not_found" } },
    lastDelivery: { eventId: "pi:s:e:completed", status: "completed", at: Date.UTC(2026, 0, 2, 3, 4, 6), ok: true, state: "queued" },
    lastReceipt: { kind: "ok", value: { state: "failed", error: "no_persona: 没有可用的人格" } },
  });
  const english = doctorReport(messagesFor("en-US"), facts);
  for (const line of [
    "  notices go: nowhere; not ready: the server has no persona (YesImBot) (no_persona)",
    "  chat: none (this server cannot message anyone)",
    "  phone push: ntfy, approvals can be answered on the notification; last one retrying: ntfy is rate-limiting; the server retries later (ntfy_rate_limited)",
    "  QQ 10001, Anon QQ 10002: unknown, the server has no chat bot loaded (bot_not_found)",
    `  last delivery: pi:s:e:completed (completed, ${localTime(Date.UTC(2026, 0, 2, 3, 4, 6))}) → accepted; receipt now failed: the server has no persona (YesImBot) (no_persona)`,
  ]) {
    assert.ok(english.includes(`${line}\n`), `${line}\n${english}`);
  }
  assert.doesNotMatch(english, /\p{Script=Han}/u, "the server's Chinese detail is not shown in English");
  const chinese = doctorReport(messagesFor("zh-CN"), facts);
  for (const line of [
    "  通知去向：无处可去；未就绪：服务端没有可用的人格（YesImBot）（no_persona）",
    "  聊天：没有（这个服务端不能私聊任何人）",
    "  手机推送：ntfy，审批可在通知上直接批准或拒绝；最近一次 retrying：ntfy 限流了，服务端稍后重试（ntfy_rate_limited）",
    "已接受，当前回执 failed：服务端没有可用的人格（YesImBot）（no_persona）",
  ]) {
    assert.ok(chinese.includes(line), `${line}\n${chinese}`);
  }
});

test("the footer shows an outage while it lasts: since when, and the notices held", () => {
  const since = Date.UTC(2026, 0, 2, 3, 4, 5);
  const clock = (locale: string) => new Intl.DateTimeFormat(locale, { timeStyle: "medium" }).format(since);
  const target = { qq: "10001", note: "reachable" as const };
  assert.equal(
    footerText(messagesFor("en-US"), "active", true, target, { since, held: 2 }),
    `Anon notices: on → QQ 10001 (recipient reachable) · server unreachable since ${clock("en-US")}, notices held: 2`,
  );
  assert.equal(
    footerText(messagesFor("zh-CN"), "active", true, target, { since, held: 2 }),
    `Anon 通知：已开启 → QQ 10001（目标可达） · 服务端不可达（自 ${clock("zh-CN")} 起），暂存通知 2 条`,
  );
  assert.equal(
    footerText(messagesFor("en-US"), "active", true, target, { since, held: 0 }),
    `Anon notices: on → QQ 10001 (recipient reachable) · server unreachable since ${clock("en-US")}`,
  );
});

test("no text of the English catalogue holds Chinese, whatever it is called with", () => {
  const rendered = [...leaves(messagesFor("en-US"))].map(([key, text]) => {
    if (typeof text !== "function") return [key, String(text)] as const;
    const args = Array.from({ length: text.length }, (_, i) => Object.assign([`arg${i}`], { toString: () => `arg${i}` }));
    try {
      return [key, String(text(...args))] as const;
    } catch {
      return [key, ""] as const;
    }
  });
  assert.deepEqual(
    rendered.filter(([, text]) => /\p{Script=Han}/u.test(text)).map(([key]) => key),
    [],
  );
});

test("a server's reason reads as words with the code in brackets, in both languages", () => {
  const rows: [string, string, string][] = [
    [
      "no_persona: 没有可用的人格（没有检测到 YesImBot v3…）",
      "服务端没有可用的人格（YesImBot）（no_persona）",
      "the server has no persona (YesImBot) (no_persona)",
    ],
    ["bot_offline", "服务端的机器人不在线（bot_offline）", "the server's chat bot is offline (bot_offline)"],
    [
      "persona_busy: YesImBot conversation c-1 is mid-turn (tried 5 times, gave up)",
      "人格的会话正忙（persona_busy）",
      "the persona's conversation is busy (persona_busy)",
    ],
    [
      "send_failed: The bot could not send it: platform down",
      "服务端的机器人没能发出消息（send_failed）",
      "the server's bot could not send the message (send_failed)",
    ],
    [
      "persona_not_configured: …",
      "服务端没有配置机器人和目标，找不到 Anon 的主会话（persona_not_configured）",
      "the server has no bot and recipient configured, so Anon's conversation cannot be found (persona_not_configured)",
    ],
    ["exception: database locked", "database locked（exception）", "database locked (exception)"],
    ["HTTP 500", "HTTP 500", "HTTP 500"],
  ];
  for (const [raw, zh, en] of rows) {
    assert.equal(messagesFor("zh-CN").link.reason(raw), zh, raw);
    assert.equal(messagesFor("en-US").link.reason(raw), en, raw);
  }
});

test("switching on against a server without a chat never calls it a trial server: a Koishi whose bot is missing is none", () => {
  for (const language of ["en-US", "zh-CN"] as const) {
    const m = messagesFor(language);
    for (const text of [m.toggle.noChat, m.toggle.route.log]) assert.doesNotMatch(text, /trial|试用/, text);
  }
  assert.match(messagesFor("en-US").toggle.noChat, /no bot configured, or its bot is not loaded/);
  assert.match(messagesFor("zh-CN").toggle.noChat, /没有配置机器人，或机器人没有加载/);
});
