/** The language rule, the footer text and the doctor's report: pure, table-driven. */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import { footerText, localeLanguage, messagesFor, type FooterState, type RecipientNote } from "../../extension/messages.ts";
import { doctorReport, type DoctorFacts } from "../../extension/session/doctor-report.ts";

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

test("doctorReport shows where each value came from, never the token, and what each probe found", () => {
  const facts: DoctorFacts = {
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
    health: { kind: "ok", value: { ok: true, version: "0.4.0", protocol: { events: 1, commands: 2 }, capabilities: ["images"], session_heartbeat_timeout_ms: 30_000 } },
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
      "  legacy source folder /ext/config.json: missing",
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
      "  outbox backlog: 2 (oldest 2026-01-02T03:04:05.000Z)",
      "  last delivery: pi:s:e:completed (completed, 2026-01-02T03:04:06.000Z) → failed (3 attempts): HTTP 503",
      "Test notice",
      "  sent ext:s:doctor-1",
      "  receipt: queued (timed out before it was final)",
    ].join("\n"),
  );
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
    ["nobody to ask", (m) => m.noPerson("rm -rf"), /rm -rf.*\(approval needs an interactive, switched-on session\)$/],
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
