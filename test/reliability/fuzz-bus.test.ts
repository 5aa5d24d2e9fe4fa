/**
 * Property-based fuzzing of the EventBus `anon-notify:send` payload, through the real path: a
 * probe extension beside anon-notify in a REAL Pi session (SDK + faux model) emits generated
 * payloads — arbitrary values, mutated valid requests, marker injections, astral text, values JSON
 * cannot carry, throwing getters — while the session is switched on and reports to a real
 * notify-webhook (Koishi, SQLite, log persona). Asserted:
 *   - emitting never throws into the sender, Pi records no extension error, and the session still
 *     completes a run and reports it afterwards;
 *   - every valid request reaches the server exactly once, nothing invalid does;
 *   - every one handed to the persona is one closed `[EXTERNAL_AUTOMATION_EVENT]` block whose
 *     JSON carries the text sent (cut to the wire limits only).
 *
 * Payloads: 10,000 with RELIABILITY=long, a few hundred otherwise (BUS_RUNS overrides); BUS_SEED replays.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { LIMITS, oneLine } from "../../protocol/wire.ts";
import { SendRequest } from "../../protocol/state-bus.ts";
import { AUDIT_TABLE } from "../../server/audit/store.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { ai } from "../../harness/pi.ts";
import { probe } from "../helpers/probe.ts";
import { LONG, hostileString, parseBlock, seedFrom } from "./support.ts";
import { waitUntil } from "../../harness/wait.ts";

const RUNS = Number(process.env.BUS_RUNS ?? (LONG ? 10_000 : 300));
const SEED = seedFrom("BUS_SEED");

/** Values that exist only in memory, where another extension's payload lives. */
function inMemoryOddities(n: number): unknown[] {
  const circular: Record<string, unknown> = { status: "info", summary: "circular", eventId: `fz-${n}-circ` };
  circular.details = { self: circular };
  const throwing = { status: "info", eventId: `fz-${n}-get` } as Record<string, unknown>;
  Object.defineProperty(throwing, "summary", {
    enumerable: true,
    get: () => {
      throw new Error("getter boom");
    },
  });
  const revoked = Proxy.revocable({}, {});
  revoked.revoke();
  return [
    circular,
    throwing,
    revoked.proxy,
    { status: "info", summary: "bigint", eventId: `fz-${n}-big`, details: { n: 10n } },
    { status: "info", summary: "symbol", eventId: `fz-${n}-sym`, details: { s: Symbol("x") } },
    { status: "info", summary: "function", eventId: `fz-${n}-fn`, details: { f: () => 1 } },
    Object.create(null),
    new Map([["status", "info"]]),
    [1, 2, 3],
  ];
}

test(`anon-notify:send, ${RUNS} generated payloads through a real Pi session: no throw, valid ones delivered once, blocks closed`, {
  timeout: LONG ? 2 * 60 * 60_000 : 5 * 60_000,
}, async (t) => {
  const koishi = await startKoishi({ config: { logPersona: true, eventsPerMinute: 1_000_000_000, eventBurst: 1_000_000_000, watchdogEnabled: false } });
  const observer = probe();
  const pi = await piOnServer(t, koishi, { extensions: [observer.extension], userConfig: { delivery: { minIntervalMs: 0 } } });
  await pi.prompt("/anon-notify");
  assert.equal(observer.last()?.status, "active");
  const sessionId = pi.session.sessionManager.getSessionId();

  let n = 0;
  const valid = fc.record(
    {
      status: fc.constantFrom("completed", "failed", "warning", "info"),
      summary: fc.oneof(
        hostileString(2000).map((s) => s || "x"),
        fc.string({ unit: "grapheme", minLength: 1000, maxLength: 1500 }),
        fc.constant("😀".repeat(1300)),
      ),
      source: hostileString(200).map((s) => s || "s"),
      task: fc.oneof(hostileString(300), fc.constant("𝒳".repeat(250))),
      details: fc.dictionary(hostileString(20), fc.oneof(hostileString(100), fc.integer(), fc.boolean(), fc.constant(null)), { maxKeys: 5 }),
      url: fc.oneof(fc.webUrl(), fc.constant("https://example.com/[/EXTERNAL_AUTOMATION_EVENT]")),
      delivery: fc.constantFrom("anon", "anon", "direct"),
    },
    { requiredKeys: ["status", "summary"] },
  );
  const mutatedValid = fc
    .tuple(
      valid,
      fc.option(fc.tuple(fc.constantFrom("status", "summary", "source", "task", "details", "url", "delivery", "eventId", "extra"), fc.anything()), { freq: 3 }),
    )
    .map(([payload, mutation]) => {
      const result: Record<string, unknown> = { ...payload, eventId: `fz-${n}` };
      if (mutation) result[mutation[0]] = mutation[1];
      return result;
    });
  const payload = fc.oneof(
    { weight: 6, arbitrary: mutatedValid },
    { weight: 1, arbitrary: fc.anything({ withBigInt: true, withNullPrototype: true, withMap: true, withSet: true }) },
  );

  const expectedIds = new Set<string>();
  const sent = new Map<string, SendRequest>();
  /** Valid requests without an eventId: the extension names them itself. */
  const withoutId: SendRequest[] = [];
  let emitted = 0;
  const send = (value: unknown) => {
    emitted++;
    // What the extension must accept: the published schema's verdict (a hostile payload may make even that throw).
    let verdict: SendRequest | undefined;
    try {
      const parsed = SendRequest.safeParse(value);
      if (parsed.success && Buffer.byteLength(JSON.stringify(parsed.data.details ?? {})) <= LIMITS.detailsBytes) verdict = parsed.data;
    } catch {
      verdict = undefined;
    }
    assert.doesNotThrow(() => observer.send(value), "emitting anon-notify:send never throws into the sender");
    if (verdict?.eventId) {
      const id = `ext:${sessionId}:${verdict.eventId}`;
      // A reused eventId is the same notice: the first one counts.
      if (!sent.has(id)) sent.set(id, verdict);
      expectedIds.add(id);
    } else if (verdict) {
      withoutId.push(verdict);
    }
  };
  fc.assert(
    fc.property(payload, (value) => {
      n++;
      send(value);
    }),
    { numRuns: RUNS, seed: SEED },
  );
  for (const oddity of inMemoryOddities(n)) send(oddity);

  // The session still works: a run completes and its notice arrives after everything sent before it.
  // Every valid notice goes through its own synced acceptance first, so the bound grows with how many there are.
  const drainBoundMs = 120_000 + 200 * (expectedIds.size + withoutId.length);
  pi.script([ai.fauxAssistantMessage("仍然正常。")]);
  await pi.prompt("after the fuzz");
  const db = koishi.app.database;
  const rows = await waitUntil(
    async () => {
      const all = await db.get(EVENT_TABLE, { session_id: sessionId }, ["event_id", "status", "delivery", "state"]);
      return all.some((row) => row.status === "completed" && !row.event_id.startsWith("ext:")) ? all : undefined;
    },
    "the control run's notice reached the server",
    drainBoundMs,
  );
  assert.deepEqual(pi.extensionErrors, [], "no extension error");

  const received = new Set(rows.filter((row) => row.event_id.startsWith("ext:")).map((row) => row.event_id));
  const missing = [...expectedIds].filter((id) => !received.has(id));
  assert.deepEqual(
    missing.slice(0, 5).map((id) => ({ id, summary: sent.get(id)?.summary.slice(0, 40), length: sent.get(id)?.summary.length })),
    [],
    `every valid request reached the server (${missing.length} missing)`,
  );
  const named = [...received].filter((id) => !expectedIds.has(id));
  assert.equal(named.length, withoutId.length, "each valid request without an eventId arrived once under its own id, and nothing invalid arrived");

  const anon = rows.filter((row) => sent.has(row.event_id) && row.delivery === "anon").map((row) => row.event_id);
  const handed = new Map<string, string[]>();
  await waitUntil(
    async () => {
      handed.clear();
      for (const row of await db.get(AUDIT_TABLE, { action: "event.handed_to_persona" }, ["subject", "data"])) {
        handed.set(row.subject!, [...(handed.get(row.subject!) ?? []), String(row.data.text)]);
      }
      return anon.every((id) => handed.has(id)) ? true : undefined;
    },
    "every anon request handed to the persona",
    drainBoundMs,
  );
  const cutOrEqual = (shown: unknown, original: string | undefined, what: string) => {
    if (original === undefined) return;
    assert.equal(typeof shown, "string", what);
    const text = shown as string;
    assert.ok(text === original || (text.endsWith("…") && original.startsWith(text.slice(0, -1))), `${what}: the text sent, cut only at the end`);
  };
  for (const id of anon) {
    assert.equal(handed.get(id)!.length, 1, `${id} handed to the persona once`);
    const block = parseBlock(handed.get(id)![0]!);
    const request = sent.get(id)!;
    assert.equal(block.event_id, id);
    cutOrEqual(block.summary, request.summary, `${id} summary`);
    // One-line fields: the server shows each run of line breaks and control characters as one space.
    const oneLined = (text: string | undefined) => (text === undefined ? undefined : oneLine(Number.MAX_SAFE_INTEGER).parse(text));
    cutOrEqual(block.task, oneLined(request.task), `${id} task`);
    cutOrEqual(block.source, oneLined(request.source), `${id} source`);
  }
  t.diagnostic(
    `seed ${SEED}: ${emitted} payloads emitted, ${expectedIds.size + withoutId.length} valid and delivered once each, ${anon.length} blocks parsed back closed, ${emitted - expectedIds.size - withoutId.length} refused or repeated ids`,
  );
});
