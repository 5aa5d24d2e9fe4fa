/** The chat's and the mute's pure decisions, table-driven, and the two languages kept in step. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { EventBody } from "../../protocol/events.ts";
import { chatOwner, refusalStep, refusedExcerpt, verdictOf, type RefusalState } from "../../server/chat/owner-guard.ts";
import { resolveRef, SessionNumbers } from "../../server/chat/refs.ts";
import { covering, digestEvent, digestText, isMuted, isUrgent, muteUntil, parseDuration, URGENT_KINDS } from "../../server/mute/decisions.ts";
import { LOCALES, countText, readLocale, type LocaleTree } from "../../server/locales/load.ts";
import { validEvent } from "../../harness/event-client.ts";
import { sayIn, zh } from "./say.ts";

test("the owner is the configured platform and user, in a private chat, typing the command", () => {
  const owner = chatOwner("onebot:514", "10001");
  const speaker = { platform: "onebot", userId: "10001", isDirect: true, typed: true };
  const cases: [Parameters<typeof verdictOf>[1], ReturnType<typeof verdictOf>][] = [
    [speaker, "owner"],
    [{ ...speaker, userId: "20002" }, "stranger"],
    [{ ...speaker, platform: "telegram" }, "stranger"],
    [{ ...speaker, isDirect: false }, "group"],
    [{ ...speaker, typed: false }, "not_typed"],
    [{ ...speaker, userId: undefined }, "stranger"],
  ];
  for (const [who, verdict] of cases) assert.equal(verdictOf(owner, who), verdict, JSON.stringify(who));
  for (const [botId, recipientId] of [
    ["", "10001"],
    ["onebot:514", ""],
    ["onebot", "10001"],
  ]) {
    assert.equal(verdictOf(chatOwner(botId!, recipientId!), speaker), "not_configured");
  }
});

const session = (session_id: string, project: string): SessionProjection => ({
  session_id,
  project,
  model: null,
  state: "idle",
  activity: null,
  supports_images: true,
  last_activity_at: "2026-11-30T03:00:00.000Z",
  last_seen_at: "2026-11-30T03:00:00.000Z",
  mixed_scripts: false,
});

test("refusals per user: answered once, then silent for the quiet time; the next answered one carries the count", () => {
  let state: RefusalState | undefined;
  const steps = [0, 1000, 2000, 10_000, 10_000 + 1000].map((ms) => {
    const step = refusalStep(state, ms, 10_000);
    state = step.state;
    return [step.answer, step.unansweredBefore];
  });
  assert.deepEqual(steps, [
    [true, 0],
    [false, 0],
    [false, 0],
    [true, 2],
    [false, 0],
  ]);
  assert.equal(refusedExcerpt({ args: ["x".repeat(5000)] }).length <= 230, true);
  assert.equal(refusedExcerpt({ args: ["short"] }), '{"args":["short"]}');
});

test("session references: numbers stay while a session is online, prefixes and project names resolve, ambiguity is refused", () => {
  const numbers = new SessionNumbers();
  const a = session("019a7f00-aaaa", "shop");
  const b = session("019a7f00-bbbb", "blog");
  const c = session("019b0000-cccc", "shop");
  assert.deepEqual(
    numbers.number([b, a]).map((n) => [n.number, n.session.project]),
    [
      [1, "shop"],
      [2, "blog"],
    ],
  );
  assert.deepEqual(
    numbers.number([c, b]).map((n) => [n.number, n.session.session_id]),
    [
      [1, c.session_id],
      [2, b.session_id],
    ],
    "#2 keeps its number; #1 is free again",
  );
  const listed = numbers.number([c, b, a]);
  const cases: [string, string][] = [
    ["#2", "found:019a7f00-bbbb"],
    ["2", "found:019a7f00-bbbb"],
    ["#9", "none"],
    ["019b", "found:019b0000-cccc"],
    ["019A7F00-BB", "found:019a7f00-bbbb"],
    ["019a", "ambiguous:019a7f00-bbbb,019a7f00-aaaa"],
    ["019", "none"],
    ["blog", "found:019a7f00-bbbb"],
    ["shop", "ambiguous:019b0000-cccc,019a7f00-aaaa"],
    ["019a7f00-aaaa", "found:019a7f00-aaaa"],
  ];
  for (const [ref, expected] of cases) {
    const r = resolveRef(ref, listed);
    const got =
      r.kind === "found"
        ? `found:${r.session.session_id}`
        : r.kind === "ambiguous"
          ? `ambiguous:${r.candidates.map((x) => x.session.session_id).join(",")}`
          : "none";
    assert.equal(got, expected, ref);
  }
});

test("urgency: failed runs, the server's own watchdog notices and approval mentions, and needs-you notices break through, each configurable; an agent's markers ask for nothing", () => {
  const event = (status: EventBody["status"], details: Record<string, unknown> | null = null, event_id = "pi:s-1:e-1") => ({ event_id, status, details });
  const cases: [ReturnType<typeof event>, boolean][] = [
    [event("completed"), false],
    [event("failed"), true],
    [event("warning", { watchdog: "stalled" }, "watchdog:stalled:abc"), true],
    [event("info", { approval: { code: "ABCDE" } }, "approval:ap-1:request"), true],
    [event("warning", { watchdog: "stalled" }), false],
    [event("info", { approval: { code: "ABCDE" } }), false],
    [event("info", { approval: { code: "ABCDE" } }, "x-approval:ap-1"), false],
    [event("info", { needs_you: true }), true],
    [event("info", { needs_you: false }), false],
    [event("progress", { report: {} }), false],
  ];
  for (const [e, urgent] of cases) assert.equal(isUrgent(e, URGENT_KINDS), urgent, JSON.stringify(e));
  assert.equal(isUrgent(event("failed"), ["watchdog"]), false);
  assert.equal(isUrgent(event("warning", { watchdog: "vanished" }, "watchdog:vanished:abc"), []), false);
});

test("durations people type, and which mutes hold a session", () => {
  const cases: [string, number | null][] = [
    ["30m", 30],
    ["2h", 120],
    ["1d", 1440],
    ["1h30m", 90],
    ["90", 90],
    ["2小时", 120],
    ["45分钟", 45],
    ["7d", 10080],
    ["8d", null],
    ["0", null],
    ["soon", null],
    ["#1", null],
    ["2h x", null],
  ];
  for (const [text, minutes] of cases) assert.equal(parseDuration(text), minutes, text);
  const now = new Date("2026-11-30T03:00:00.000Z");
  assert.equal(muteUntil(now, undefined).toISOString(), "2026-11-30T04:00:00.000Z");
  const mutes = [
    { session_id: "s-1", until: new Date(now.getTime() + 1) },
    { session_id: null, until: now },
  ];
  assert.equal(covering(mutes, "s-2").length, 1, "an ended all-sessions mute still covers until released");
  assert.equal(isMuted(mutes, "s-1", now), true);
  assert.equal(isMuted(mutes, "s-2", now), false);
});

test("a digest is short, lists what it holds, and tells how to answer", () => {
  const events = Array.from({ length: 12 }, (_, i) => EventBody.parse(validEvent({ session_id: "s-1", summary: `第 ${i} 条 ${"很长".repeat(60)}` })));
  const text = digestText(events, zh);
  assert.match(text, /^【Pi Agent 通知 · 静音期间 12 条】/);
  assert.match(text, /\n1\. \[完成\] /);
  assert.match(text, /……另有 2 条\n回复本条即可给该会话发指令。$/);
  assert.ok(text.split("\n").every((line) => line.length < 140));
  const digest = EventBody.parse(digestEvent(events, "anon", new Date(), zh));
  assert.equal(digest.session_id, "s-1");
  assert.equal((digest.details!.mute_digest as { count: number }).count, 12);
  assert.equal(digestEvent(events, "anon", new Date(), zh).event_id, digest.event_id, "the same held notices give the same digest id");
});

test("in English the digest has no Chinese of its own", () => {
  const events = [
    EventBody.parse(validEvent({ session_id: "s-1", summary: "tests pass" })),
    EventBody.parse(validEvent({ session_id: "s-2", status: "failed", summary: "" })),
  ];
  const text = digestText(events, sayIn("en-US"));
  assert.equal(
    text,
    [
      "[Pi Agent notice · 2 while muted]",
      `1. [completed] ${events[0]!.source}: tests pass`,
      `2. [failed] ${events[1]!.source}`,
      "To send a session an instruction: anon.send <session> <instruction>.",
    ].join("\n"),
  );
  const digest = digestEvent(events, "direct", new Date(), sayIn("en-US"));
  assert.equal(digest.source, "anon-notify · mute digest");
  assert.match(digest.summary, /^2 notices arrived while muted:\n1\. \[completed\]/);
});

test("counts read right in each language: one notice, used once, through the language's plural rules", () => {
  const one = [EventBody.parse(validEvent({ session_id: "s-1", summary: "tests pass" }))];
  assert.match(digestEvent(one, "direct", new Date(), sayIn("en-US")).summary, /^1 notice arrived while muted:\n/);
  assert.match(digestEvent(one, "direct", new Date(), sayIn("zh-CN")).summary, /^静音期间收到 1 条通知：\n/);
  assert.deepEqual(
    [1, 2, 0].map((n) => countText(sayIn("en-US"), "anon-notify.uses", n)),
    ["used 1 time", "used 2 times", "used 0 times"],
  );
  assert.deepEqual(
    [1, 2].map((n) => countText(sayIn("zh-CN"), "anon-notify.uses", n)),
    ["已用 1 次", "已用 2 次"],
  );
});

function texts(tree: LocaleTree, prefix = ""): [string, string][] {
  return Object.entries(tree).flatMap(([key, value]): [string, string][] =>
    typeof value === "string" ? [[prefix + key, value]] : texts(value, `${prefix}${key}.`),
  );
}

test("every text exists in both languages, with the same placeholders", () => {
  const [zh, en] = LOCALES.map((locale) => new Map(texts(readLocale(locale))));
  assert.deepEqual([...en!.keys()].sort(), [...zh!.keys()].sort());
  const placeholders = (text: string) => [...new Set(text.match(/\{[^}]*\}/g) ?? [])].sort();
  for (const [key, text] of zh!) assert.deepEqual(placeholders(en!.get(key)!), placeholders(text), key);
});
