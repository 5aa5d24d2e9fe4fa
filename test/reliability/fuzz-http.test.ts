/**
 * Property-based fuzzing (fast-check) of every HTTP route of a real notify-webhook (Koishi app,
 * plugin-server on loopback, SQLite): mutated valid bodies, arbitrary JSON, raw text, hostile
 * strings, odd path segments and query strings, random headers. For every case:
 *   - never a 5xx (507 image_budget_exceeded is the protocol's refusal, counted apart) and the
 *     server keeps answering;
 *   - every error is `{"error": <protocol ErrorCode>}` with no stack trace, and the same rejected
 *     request sent again gets the same answer (stable codes);
 *   - a rejected request changes nothing: event, command and approval rows, the stored baseline
 *     receipt and approval, the synchronous audit rows and the online-session list are identical
 *     before and after;
 *   - every accepted event reaches the persona as one `[EXTERNAL_AUTOMATION_EVENT]` block whose
 *     JSON parses back to exactly the fields sent, marker injections included.
 *
 * Cases per route: 10,000 with RELIABILITY=long, a hundred otherwise (FUZZ_RUNS overrides);
 * FUZZ_SEED replays a run; FUZZ_ROUTES=0-6 runs only those routes (by position).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { Agent, request } from "undici";
import { BatchAccepted, EventBody } from "../../protocol/events.ts";
import { ErrorCode, ErrorAnswer } from "../../protocol/wire.ts";
import { blockPayload } from "../../server/persona/block-rules.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { COMMAND_TABLE } from "../../server/queue/table.ts";
import { AUDIT_TABLE } from "../../server/audit/store.ts";
import { APPROVAL_TABLE } from "../../server/approvals/store.ts";
import { koishi as koishiRuntime } from "../../server/koishi.ts";
import { startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { agentApi, OPERATOR_TOKEN, operatorApi } from "../../harness/agent-api.ts";
import { validEvent } from "../../harness/event-client.ts";
import { imageOf } from "../server/images.ts";
import { LONG, formatTally, hostileString, parseBlock, seedFrom, tally } from "./support.ts";
import { waitUntil } from "../../harness/wait.ts";

const RUNS = Number(process.env.FUZZ_RUNS ?? (LONG ? 10_000 : 100));
const SEED = seedFrom("FUZZ_SEED");
const SESSION = "s-1";
const RUNTIME = "r-1";
/** Small, so that accepted image commands also reach the 507 refusal during a run. */
const IMAGE_BUDGET = 256 * 1024;
/** Audit rows written by the worker after an accepted event, or by the operator edge for every request: not state a refusal could change. */
const UNSYNCHRONISED_AUDIT = ["operator.request", "event.handed_to_persona", "event.sent_direct"];
/** Rows that record a refusal itself (who tried to decide an approval, and why not): the trail the refusal is meant to leave. */
const REFUSAL_AUDIT = ["approval.refused"];

interface FuzzRequest {
  method: "GET" | "POST";
  path: string;
  /** Bytes when the case carries invalid UTF-8. */
  body?: string | Buffer;
  headers: Record<string, string>;
}

const DROP = Symbol("drop");
const anyJson = fc.jsonValue({ maxDepth: 2 });
const headerText = fc.stringMatching(/^[!-~]{0,40}$/);

/** A valid value for each key (the template) mutated key by key: kept, dropped, replaced by anything, plus an unknown key now and then. */
function mutated(template: Record<string, fc.Arbitrary<unknown>>, hostile: Record<string, fc.Arbitrary<unknown>> = {}): fc.Arbitrary<Record<string, unknown>> {
  const keys = Object.keys(template);
  const perKey = keys.map((key) =>
    fc.oneof(
      { weight: 12, arbitrary: template[key]! },
      { weight: 1, arbitrary: fc.constant(DROP) },
      { weight: 1, arbitrary: anyJson },
      { weight: hostile[key] ? 3 : 0, arbitrary: hostile[key] ?? fc.constant(null) },
    ),
  );
  const broken = fc.tuple(fc.tuple(...perKey), fc.option(fc.tuple(fc.string({ maxLength: 12 }), anyJson), { freq: 10 })).map(([values, extra]) => {
    const body: Record<string, unknown> = {};
    keys.forEach((key, index) => {
      if (values[index] !== DROP) body[key] = values[index];
    });
    if (extra) body[extra[0]] = extra[1];
    return body;
  });
  // A good share stays valid (hostile strings inside the limits), so accepted paths are fuzzed too.
  return fc.oneof({ weight: 2, arbitrary: fc.record(template) }, { weight: 3, arbitrary: broken });
}

/** Mostly mutated valid bodies; sometimes any JSON, sometimes text that is not JSON. */
/** Byte sequences no UTF-8 decoder may accept: stray bytes, overlong forms, a cut sequence, an encoded surrogate. */
const INVALID_UTF8 = [[0xff, 0xfe, 0xc0, 0xaf], [0x80], [0xc0, 0x80], [0xe2, 0x82], [0xed, 0xa0, 0x80], [0xf8, 0x88, 0x80, 0x80, 0x80]].map((bytes) =>
  Buffer.from(bytes),
);

/** The JSON with `bad` spliced into its first string value (a key would be refused as unknown anyway). */
function withInvalidUtf8(json: string, bad: Buffer): Buffer {
  const at = json.indexOf('":"');
  const cut = at < 0 ? json.length : at + 3;
  return Buffer.concat([Buffer.from(json.slice(0, cut)), bad, Buffer.from(json.slice(cut))]);
}

function bodyOf(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string | Buffer> {
  return fc.oneof(
    { weight: 8, arbitrary: valid.map((body): string | Buffer => JSON.stringify(body)) },
    { weight: 1, arbitrary: anyJson.map((value) => JSON.stringify(value)) },
    { weight: 1, arbitrary: fc.string({ maxLength: 60 }) },
    { weight: 1, arbitrary: fc.tuple(valid, fc.constantFrom(...INVALID_UTF8)).map(([body, bad]) => withInvalidUtf8(JSON.stringify(body), bad)) },
  );
}

/** `.` and `..` (also as `%2e`) are resolved by the client's URL parser before sending: not a segment the server sees. */
const dotSegment = (s: string) => [".", ".."].includes(s.replace(/%2e/gi, "."));

/** A path segment: a known id, any text encoded, or raw (malformed) percent sequences. */
function segment(known: () => string[]): fc.Arbitrary<string> {
  return fc
    .oneof(
      { weight: 4, arbitrary: fc.nat().map((n) => encodeURIComponent(known()[n % Math.max(1, known().length)] ?? "none")) },
      { weight: 2, arbitrary: fc.string({ minLength: 1, maxLength: 140 }).map((s) => encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "x"))) },
      { weight: 1, arbitrary: fc.stringMatching(/^(%[0-9A-Fa-fG-Z]{0,2}|[A-Za-z0-9._:~-]){1,12}$/) },
    )
    .filter((s) => !dotSegment(s));
}

/** A replaced `wait_ms` may be any number: one the server accepts is held to a few milliseconds, as the long poll would hold the run for up to 25 s. */
function shortWait(fields: Record<string, unknown>): Record<string, unknown> {
  const wait = Number(typeof fields.wait_ms === "string" ? fields.wait_ms : JSON.stringify(fields.wait_ms));
  return Number.isFinite(wait) && wait > 5 ? { ...fields, wait_ms: "5" } : fields;
}

function queryOf(valid: fc.Arbitrary<Record<string, unknown>>): fc.Arbitrary<string> {
  return valid.map((fields) => {
    const query = new URLSearchParams();
    for (const [key, value] of Object.entries(fields)) query.append(key, typeof value === "string" ? value : JSON.stringify(value));
    const text = query.toString().replace(/%EF%BF%BD/g, "");
    return text ? `?${text}` : "";
  });
}

const contentType = fc.constantFrom<Record<string, string>>({ "content-type": "application/json" }, {}, { "content-type": "text/plain" });

test(`every HTTP route, ${RUNS} generated cases each: no 5xx, stable error codes, refusals change nothing, blocks stay closed`, {
  timeout: LONG ? 4 * 60 * 60_000 : 10 * 60_000,
}, async (t) => {
  const server: KoishiHarness = await startKoishi({
    config: {
      operatorToken: OPERATOR_TOKEN,
      logPersona: true,
      eventsPerMinute: 1_000_000_000,
      eventBurst: 1_000_000_000,
      heartbeatsPerMinute: 1_000_000_000,
      heartbeatBurst: 1_000_000_000,
      heartbeatsTotalPerMinute: 1_000_000_000,
      heartbeatTotalBurst: 1_000_000_000,
      sessionHeartbeatTimeoutMs: 24 * 60 * 60_000,
      commandLeaseMs: 24 * 60 * 60_000,
      // Stops not handed out would be cancelled by the sweep in the middle of a later route.
      stopTtlMs: 24 * 60 * 60_000,
      // The baseline approval would time out (15 min by default) in the middle of a long run.
      approvalMaxMinutes: 24 * 60,
      // Past the owner's pace the messenger's minute-by-minute digest is a server notice of its own,
      // written in the middle of whichever route runs then.
      approvalMessagesPerMinute: 1_000_000_000,
      commandImageBudgetBytes: IMAGE_BUDGET,
      watchdogEnabled: false,
    },
  });
  t.after(() => server.stop());
  const dispatcher = new Agent({ connections: 1, keepAliveTimeout: 30_000 });
  t.after(() => dispatcher.close());
  const db = server.app.database;
  const agent = agentApi(server);
  const operator = operatorApi(server);

  // A state with something behind every route: a live session, a stored event, commands pending and leased.
  assert.equal((await agent.heartbeat({ session_id: SESSION, runtime_id: RUNTIME })).status, 200);
  const baseline = validEvent({ session_id: SESSION });
  const baselineId = String(baseline.event_id);
  const knownEvents = [baselineId];
  const knownCommands: string[] = [];
  const leaseTokens: string[] = [];
  await request(`${server.baseUrl}/events`, {
    method: "POST",
    dispatcher,
    headers: { authorization: `Bearer ${server.token}` },
    body: JSON.stringify(baseline),
  }).then((r) => r.body.dump());
  for (const instruction of ["第一条", "第二条", "第三条"]) {
    const created = await operator.create({ session_id: SESSION, instruction, images: [imageOf("image/png", 64)] });
    knownCommands.push(created.body.command.command_id);
  }
  const baselineCommands = [...knownCommands];
  const claimed = await agent.claim(SESSION, RUNTIME);
  leaseTokens.push(claimed.body.lease.token);
  await waitUntil(async () => ((await db.get(EVENT_TABLE, { event_id: baselineId }))[0]?.state === "context_injected" ? true : undefined), "baseline injected");
  // An open approval (no bot is configured, so its request stays owed and nothing is sent meanwhile).
  const approvalTemplate = {
    approval_id: fc.uuid().map((id) => `ap-${id}`),
    session_id: fc.constant(SESSION),
    runtime_id: fc.constant(RUNTIME),
    run_id: fc.constant(`${RUNTIME}.run.1`),
    tool_call_id: fc.uuid(),
    tool: fc.constantFrom("bash", "write", "ask_approval"),
    args_digest: fc.constant("a".repeat(64)),
    cwd: fc.constant("/home/u/proj"),
    action: hostileString(40).map((s) => s || "rm -rf"),
    reason: hostileString(200),
    command: hostileString(1000).map((s) => s || "rm -rf build"),
    command_hidden_chars: fc.constant(0),
    rules: fc.constant(["rm-rf"]),
    grantable: fc.boolean(),
    source: fc.constantFrom("policy", "ask_approval"),
    expires_at: fc.constant(new Date(Date.now() + 24 * 60 * 60_000).toISOString()),
    created_at: fc.constant(new Date().toISOString()),
  };
  const baselineApproval = fc.sample(fc.record(approvalTemplate), { numRuns: 1, seed: SEED })[0]!;
  const approvalAnswer = await request(`${server.baseUrl}/approvals`, {
    method: "POST",
    dispatcher,
    headers: { authorization: `Bearer ${server.token}`, "content-type": "application/json" },
    body: JSON.stringify(baselineApproval),
  });
  assert.equal(approvalAnswer.statusCode, 201, await approvalAnswer.body.text());
  // The messenger mentions a new approval to the persona (a server notice) in the background: settled
  // before the next route runs, so a later refusal is measured against a quiet store.
  const mentioned = (approvalId: string) =>
    waitUntil(
      async () => (await db.get(APPROVAL_TABLE, { approval_id: approvalId }, ["persona_mentioned"]))[0]?.persona_mentioned === true,
      `approval ${approvalId} mentioned to the persona`,
      30_000,
    );
  await mentioned(baselineApproval.approval_id);
  const knownApprovals = [baselineApproval.approval_id];

  const sessions = () => [SESSION, "s-2", "s-offline"];
  const validId = fc.oneof(fc.constantFrom(...sessions()), fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/));
  const iso = fc.date({ min: new Date("2000-01-01"), max: new Date("2100-01-01"), noInvalidDate: true }).map((d) => d.toISOString());
  const anyOf = <T>(list: () => T[]) => fc.nat().map((n) => list()[n % list().length]!);
  const image = fc.oneof(
    fc
      .tuple(fc.constantFrom("image/png", "image/jpeg", "image/gif", "image/webp") as fc.Arbitrary<"image/png">, fc.integer({ min: 1, max: 40_000 }))
      .map(([mime, size]) => imageOf(mime, size)),
    fc.record({
      mime_type: fc.constantFrom("image/png", "image/svg+xml", "text/plain"),
      data: fc.oneof(fc.base64String({ maxLength: 40 }), fc.string({ maxLength: 40 }), fc.constant("data:image/png;base64,iVBORw0KGgo=")),
    }),
  );

  const eventTemplate = {
    event_id: fc.uuid().map((id) => `pi:${id}:run:1`),
    session_id: fc.constant(SESSION),
    runtime_id: fc.constant(RUNTIME),
    source: hostileString(120),
    task: hostileString(200),
    status: fc.constantFrom("started", "progress", "completed", "failed", "tool_error", "warning", "info"),
    summary: hostileString(1200),
    details: fc.oneof(fc.constant(null), fc.dictionary(hostileString(30), fc.oneof(hostileString(80), fc.integer(), fc.boolean()), { maxKeys: 4 })),
    url: fc.oneof(
      fc.constant(null),
      hostileString(40).map((s) => `https://example.com/${encodeURIComponent(s.replace(/[\ud800-\udfff]/g, "x"))}`),
      fc.webUrl(),
    ),
    context_usage: fc.oneof(
      fc.constant(null),
      fc.record({ used_tokens: fc.nat(), context_window: fc.integer({ min: 1 }), percent: fc.double({ min: 0, max: 500, noNaN: true }) }),
    ),
    created_at: iso,
    delivery: fc.constant("anon"),
  };
  const eventHostile = {
    source: fc.string({ minLength: 121, maxLength: 200 }),
    details: fc.dictionary(fc.string(), anyJson),
    url: fc.oneof(fc.string(), fc.constant("javascript:alert(1)"), fc.constant("file:///etc/passwd")),
    context_usage: fc.record({
      used_tokens: fc.oneof(fc.constant(null), fc.integer()),
      context_window: fc.integer(),
      percent: fc.oneof(fc.constant(null), fc.double()),
    }),
    created_at: fc.string(),
    delivery: fc.string(),
  };
  const heartbeatTemplate = {
    session_id: fc.constantFrom("s-2", "s-3", "s-4"),
    runtime_id: validId,
    project: hostileString(200).map((s) => s || "p"),
    model: fc.oneof(fc.constant(null), hostileString(200)),
    state: fc.constantFrom("idle", "running"),
    supports_images: fc.boolean(),
    command_protocol: fc.integer({ min: 1, max: 3 }),
    last_activity_at: iso,
    activity: fc.oneof(fc.constant(null), hostileString(50)),
  };
  const commandTemplate = {
    session_id: fc.constantFrom(...sessions()),
    event_id: anyOf(() => knownEvents),
    instruction: hostileString(4000).map((s) => s || "做点什么"),
    images: fc.array(image, { maxLength: 4 }),
    request_key: fc.string({ minLength: 1, maxLength: 20 }),
  };
  const toolCallTemplate = {
    session_id: fc.constant(SESSION),
    runtime_id: fc.constant(RUNTIME),
    tool: fc.constant("report_progress"),
    tool_call_id: fc.uuid(),
    decision: fc.constantFrom("sent", "refused"),
    reason: fc.oneof(fc.constant(null), hostileString(200)),
    event_id: fc.constant(null),
    input: fc.dictionary(hostileString(20), hostileString(60), { maxKeys: 3 }),
    created_at: iso,
  };
  const agentAuth = { authorization: `Bearer ${server.token}` };
  const operatorAuth = { authorization: `Bearer ${OPERATOR_TOKEN}` };
  const post = (
    path: fc.Arbitrary<string>,
    body: fc.Arbitrary<string | Buffer>,
    auth: Record<string, string>,
    extraHeaders: fc.Arbitrary<Record<string, string>> = fc.constant({}),
  ) =>
    fc
      .tuple(path, body, contentType, extraHeaders)
      .map(([p, b, ct, extra]): FuzzRequest => ({ method: "POST", path: p, body: b, headers: { ...auth, ...ct, ...extra } }));
  const get = (path: fc.Arbitrary<string>, auth: Record<string, string>) => path.map((p): FuzzRequest => ({ method: "GET", path: p, headers: auth }));

  // Long polls are held at most a few milliseconds: a valid wait_ms is drawn small.
  const waitMs = fc.oneof(
    fc.integer({ min: -5, max: 5 }).map(String),
    fc.constantFrom("25001", "1e9", "NaN", "-0", "0x5", " 3", "1.5", ""),
    fc.string({ maxLength: 6 }),
  );
  const eventBody = mutated(eventTemplate, eventHostile);
  const routes: Record<string, fc.Arbitrary<FuzzRequest>> = {
    "POST /events": fc.tuple(eventBody, fc.oneof(fc.constant("same"), fc.constant("absent"), headerText), contentType).map(([body, key, ct]): FuzzRequest => {
      const headers: Record<string, string> = { ...agentAuth, ...ct };
      if (key === "same" && typeof body.event_id === "string") headers["idempotency-key"] = body.event_id;
      else if (key !== "absent" && key !== "same") headers["idempotency-key"] = key;
      return { method: "POST", path: "/events", body: JSON.stringify(body), headers };
    }),
    "POST /events (raw)": post(fc.constant("/events"), bodyOf(eventBody), agentAuth),
    "GET /events/:event_id": get(
      segment(() => knownEvents).map((id) => `/events/${id}`),
      agentAuth,
    ),
    "GET /health": get(
      queryOf(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }))).map((q) => `/health${q}`),
      agentAuth,
    ),
    "GET /recipient": get(
      queryOf(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }))).map((q) => `/recipient${q}`),
      agentAuth,
    ),
    "POST /sessions/heartbeat": post(
      fc.constant("/sessions/heartbeat"),
      bodyOf(mutated(heartbeatTemplate, { project: fc.constantFrom("/home/me/secret", "a\\b", ""), command_protocol: fc.double() })),
      agentAuth,
    ),
    "POST /sessions/offline": post(
      fc.constant("/sessions/offline"),
      bodyOf(mutated({ session_id: fc.constantFrom("s-2", "s-3", "s-4"), runtime_id: validId })),
      agentAuth,
    ),
    "GET /commands": get(
      queryOf(
        mutated(
          {
            session_id: fc.constantFrom(...sessions()),
            runtime_id: fc.constantFrom(RUNTIME, "r-other"),
            capabilities: fc.constantFrom("images", "", "images,x"),
            wait_ms: waitMs,
          },
          { wait_ms: waitMs },
        ).map(shortWait),
      ).map((q) => `/commands${q}`),
      agentAuth,
    ),
    "POST /commands/:command_id/ack": post(
      segment(() => knownCommands).map((id) => `/commands/${id}/ack`),
      bodyOf(
        mutated({
          session_id: fc.constantFrom(...sessions()),
          runtime_id: fc.constantFrom(RUNTIME, "r-other"),
          lease_token: fc.oneof(
            anyOf(() => leaseTokens),
            fc.string({ minLength: 1, maxLength: 300 }),
          ),
        }),
      ),
      agentAuth,
    ),
    "GET /operator/sessions": get(
      queryOf(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }))).map((q) => `/operator/sessions${q}`),
      operatorAuth,
    ),
    "POST /operator/commands": post(
      fc.constant("/operator/commands"),
      bodyOf(
        mutated(commandTemplate, {
          instruction: fc.string({ minLength: 4001, maxLength: 4100 }),
          images: fc.array(image, { minLength: 5, maxLength: 6 }),
          request_key: fc.string({ minLength: 513, maxLength: 520 }),
        }),
      ),
      operatorAuth,
    ),
    "GET /operator/commands": get(
      queryOf(
        mutated({ session_id: fc.constantFrom(...sessions()), limit: fc.oneof(fc.integer({ min: -5, max: 60 }).map(String), fc.string({ maxLength: 5 })) }),
      ).map((q) => `/operator/commands${q}`),
      operatorAuth,
    ),
    "POST /operator/commands/:command_id/cancel": post(
      segment(() => knownCommands).map((id) => `/operator/commands/${id}/cancel`),
      bodyOf(mutated({ session_id: fc.constantFrom(...sessions()) })),
      operatorAuth,
    ),
    "GET /operator/audit": get(
      queryOf(
        mutated({
          session_id: fc.constantFrom(...sessions()),
          since: iso,
          before: fc.oneof(fc.integer({ min: -3, max: 10_000 }).map(String), fc.constantFrom("9007199254740993", "1e3", "abc")),
          limit: fc.oneof(fc.integer({ min: -3, max: 250 }).map(String), fc.string({ maxLength: 4 })),
        }),
      ).map((q) => `/operator/audit${q}`),
      operatorAuth,
    ),
    "POST /operator/sessions/:session_id/stop": post(
      segment(sessions).map((id) => `/operator/sessions/${id}/stop`),
      bodyOf(mutated({})),
      operatorAuth,
    ),
    "POST /approvals": post(
      fc.constant("/approvals"),
      bodyOf(
        mutated(approvalTemplate, {
          approval_id: anyOf(() => knownApprovals),
          args_digest: fc.string({ maxLength: 70 }),
          action: fc.string({ minLength: 41, maxLength: 60 }),
          expires_at: fc.string(),
          source: fc.string(),
          // A cut command is refused whole (command_incomplete).
          command_hidden_chars: fc.integer({ min: 1, max: 100_000 }),
        }),
      ),
      agentAuth,
    ),
    "POST /approvals/:approval_id/resolution": post(
      segment(() => knownApprovals).map((id) => `/approvals/${id}/resolution`),
      bodyOf(
        mutated({
          session_id: fc.constantFrom(...sessions()),
          runtime_id: fc.constantFrom(RUNTIME, "r-other"),
          outcome: fc.constantFrom("approved", "rejected", "timeout"),
          via: fc.constantFrom("chat", "operator", "console", "terminal", "policy", "timeout", "aborted"),
          reason: fc.oneof(fc.constant(null), hostileString(200)),
        }),
      ),
      agentAuth,
    ),
    "GET /operator/approvals": get(
      queryOf(
        mutated({
          state: fc.constantFrom("open", "all"),
          session_id: fc.constantFrom(...sessions()),
          limit: fc.oneof(fc.integer({ min: -3, max: 120 }).map(String), fc.string({ maxLength: 4 })),
        }),
      ).map((q) => `/operator/approvals${q}`),
      operatorAuth,
    ),
    "POST /operator/approvals/:approval_id/decision": post(
      segment(() => knownApprovals).map((id) => `/operator/approvals/${id}/decision`),
      bodyOf(
        mutated({ decision: fc.constantFrom("approved", "rejected"), reason: hostileString(200) }, { reason: fc.string({ minLength: 201, maxLength: 240 }) }),
      ),
      operatorAuth,
    ),
    "GET /operator/mute": get(
      queryOf(fc.dictionary(fc.string({ maxLength: 8 }), fc.string({ maxLength: 8 }))).map((q) => `/operator/mute${q}`),
      operatorAuth,
    ),
    "POST /audit/tool-calls": post(
      fc.constant("/audit/tool-calls"),
      bodyOf(mutated(toolCallTemplate, { input: fc.dictionary(fc.string(), fc.string({ minLength: 4000, maxLength: 4200 }), { minKeys: 1, maxKeys: 2 }) })),
      agentAuth,
    ),
    "POST /events/batch": post(fc.constant("/events/batch"), bodyOf(mutated({ events: fc.array(eventBody, { maxLength: 4 }) })), agentAuth),
    // Last: an accepted mute holds every later notice back, which the closing check below counts on not happening.
    "POST /operator/mute": post(
      fc.constant("/operator/mute"),
      bodyOf(mutated({ session_id: fc.constantFrom(...sessions()), minutes: fc.oneof(fc.integer({ min: -5, max: 10_090 }), fc.double()) })),
      operatorAuth,
    ),
  };

  async function send(fuzz: FuzzRequest): Promise<{ status: number; text: string; contentType: string }> {
    const response = await request(`${server.baseUrl}${fuzz.path}`, {
      method: fuzz.method,
      dispatcher,
      // A fresh connection per case: a starved test process could otherwise reuse a socket the
      // server closed as idle meanwhile (ECONNRESET, which says nothing about the route).
      reset: true,
      headers: fuzz.headers,
      ...(fuzz.body === undefined ? {} : { body: fuzz.body }),
    });
    return { status: response.statusCode, text: await response.body.text(), contentType: String(response.headers["content-type"] ?? "") };
  }

  /** Everything a refused request must leave as it was. */
  async function fingerprint(route: string): Promise<string> {
    const { $ } = koishiRuntime;
    const [events, eventSeq, baselineRow, commands, commandRows, approvals, approvalRow, audit, online] = await Promise.all([
      db.eval(EVENT_TABLE, (row) => $.count(row.event_id)),
      db.eval(EVENT_TABLE, (row) => $.max(row.seq)),
      db.get(EVENT_TABLE, { event_id: baselineId }, ["body_hash", "body", "state", "attempts", "updated_at"]),
      db.eval(COMMAND_TABLE, (row) => $.count(row.seq)),
      db.get(COMMAND_TABLE, { command_id: baselineCommands }, ["command_id", "state", "lease_token", "deliveries", "updated_at"]),
      db.eval(APPROVAL_TABLE, (row) => $.count(row.seq)),
      db.get(APPROVAL_TABLE, { approval_id: baselineApproval.approval_id }, ["state", "decision", "decided_by", "resolved_at", "preview"]),
      db.eval(AUDIT_TABLE, (row) => $.count(row.id), { action: { $nin: [...UNSYNCHRONISED_AUDIT, ...REFUSAL_AUDIT] } }),
      // Only presence routes write the registry; asking through the operator API adds a trail row, so ask only then.
      route.startsWith("POST /sessions/") ? operator.sessions() : undefined,
    ]);
    const latestCommand = await db.get(COMMAND_TABLE, {}, { fields: ["command_id", "state", "updated_at"], sort: { seq: "desc" }, limit: 1 });
    return JSON.stringify({ events, eventSeq, baselineRow, commands, commandRows, approvals, approvalRow, latestCommand, audit, online: online?.body });
  }

  /** Waits until every accepted event has been handed to the persona; their blocks by event id. */
  async function allHandedOver(): Promise<Map<string, string>> {
    const handedOver = new Map<string, string>();
    await waitUntil(
      async () => {
        const rows = await db.get(AUDIT_TABLE, { action: "event.handed_to_persona" }, ["subject", "data"]);
        for (const row of rows) handedOver.set(row.subject!, String(row.data.text));
        return accepted.every((event) => handedOver.has(event.event_id)) ? true : undefined;
      },
      `all ${accepted.length} accepted events handed to the persona`,
      120_000,
    );
    return handedOver;
  }

  const statuses = new Map<string, number>();
  const codes = new Map<string, number>();
  const accepted: EventBody[] = [];
  let budgetRefusals = 0;
  let cases = 0;

  // FUZZ_ROUTES=first-last (indices) runs a slice, so a long run can be split over processes.
  const [first, last] = (process.env.FUZZ_ROUTES ?? `0-${Object.keys(routes).length - 1}`).split("-").map(Number);
  const selected = Object.entries(routes).slice(first, last! + 1);
  for (const [name, arbitrary] of selected) {
    // A mute would hold back (and audit) an accepted event still on its way to the persona.
    if (name === "POST /operator/mute") await allHandedOver();
    let current = await fingerprint(name);
    const runs = name === "POST /events (raw)" ? Math.ceil(RUNS / 4) : RUNS;
    await fc.assert(
      fc.asyncProperty(arbitrary, async (fuzz) => {
        cases++;
        const answer = await send(fuzz);
        tally(statuses, `${answer.status}`);
        const where = `${name}: ${fuzz.method} ${fuzz.path} ${fuzz.body?.slice(0, 300) ?? ""} → ${answer.status} ${answer.text.slice(0, 300)}`;
        assert.match(answer.contentType, /^application\/json/, where);
        const body = JSON.parse(answer.text) as Record<string, unknown>;
        if (answer.status === 507) {
          assert.equal(body.error, "image_budget_exceeded", where);
          budgetRefusals++;
        } else {
          assert.ok(answer.status < 500, `no 5xx — ${where}`);
        }
        if (Buffer.isBuffer(fuzz.body)) {
          assert.deepEqual([answer.status, body.error], [400, "invalid_request"], `invalid UTF-8 is refused, never rewritten — ${where}`);
          tally(codes, "invalid UTF-8");
        }
        const after = await fingerprint(name);
        if (answer.status >= 400) {
          const error = ErrorAnswer.safeParse(body);
          assert.ok(error.success, `error body in the protocol's shape — ${where}`);
          assert.ok(ErrorCode.options.includes(error.data.error), where);
          assert.doesNotMatch(answer.text, /\n\s+at |node:internal|\.ts:\d+/, `no stack trace — ${where}`);
          tally(codes, error.data.error);
          assert.equal(after, current, `a refused request changed nothing — ${where}\nbefore ${current}\nafter  ${after}`);
          const again = await send(fuzz);
          assert.deepEqual([again.status, again.text], [answer.status, answer.text], `the same refusal again — ${where}`);
          const afterRepeat = await fingerprint(name);
          assert.equal(afterRepeat, current, `the repeated refusal changed nothing — ${where}\nbefore ${current}\nafter  ${afterRepeat}`);
        } else if (name === "POST /events/batch") {
          // A batch is answered 200 with the accepted prefix and the refusal that ended it, worded as the single route would.
          const batch = BatchAccepted.parse(body);
          const sent = (JSON.parse(String(fuzz.body)) as { events: unknown[] }).events;
          if (batch.refused) {
            assert.equal(batch.refused.index, batch.accepted.length, `the refusal follows the accepted prefix — ${where}`);
            assert.ok(ErrorCode.options.includes(batch.refused.error as ErrorCode), where);
            tally(codes, `batch ${batch.refused.error}`);
          } else assert.equal(batch.accepted.length, sent.length, `no refusal: every event accepted — ${where}`);
          batch.accepted.forEach((receipt, i) => {
            if (receipt.duplicate) return;
            accepted.push(EventBody.parse(sent[i]));
            knownEvents.push(receipt.event_id);
          });
          if (batch.accepted.every((receipt) => receipt.duplicate)) assert.equal(after, current, `a batch that took nothing new changed nothing — ${where}`);
        } else if (name.startsWith("POST /events") && answer.status === 202 && body.duplicate === false) {
          accepted.push(EventBody.parse(JSON.parse(String(fuzz.body))));
          knownEvents.push(String(body.event_id));
        } else if (name === "POST /operator/commands" && answer.status === 201) {
          knownCommands.push(String((body.command as { command_id: string }).command_id));
        } else if (name === "POST /approvals" && answer.status === 201) {
          const approvalId = String((body.approval as { approval_id: string }).approval_id);
          knownApprovals.push(approvalId);
          await mentioned(approvalId);
          current = await fingerprint(name);
          return;
        } else if (name === "GET /commands" && (body.lease as { token?: string } | undefined)?.token) {
          leaseTokens.push((body.lease as { token: string }).token);
        }
        current = after;
      }),
      {
        numRuns: runs,
        seed: SEED,
        endOnFailure: true,
        // The failing request is in the assertion's message, cut short; fast-check's own report would print whole image bodies.
        asyncReporter: async (details) => {
          if (details.failed) throw new Error(`${name} (seed ${SEED}, path ${details.counterexamplePath}): ${String(details.errorInstance)}`);
        },
      },
    );
    // A long run takes a while: say where it is.
    if (LONG) process.stderr.write(`fuzz-http: ${name} done, ${cases} cases so far\n`);
  }

  // Every accepted event was handed over as one closed block carrying exactly the fields sent.
  const handedOver = await allHandedOver();
  for (const event of accepted) {
    const parsed = parseBlock(handedOver.get(event.event_id)!);
    const { received_at: _received, ...fields } = parsed;
    const { received_at: _sent, ...expected } = blockPayload(event, "");
    assert.deepEqual(fields, JSON.parse(JSON.stringify(expected)), `the block of ${event.event_id} parses back to the fields sent`);
  }

  t.diagnostic(
    `seed ${SEED}: ${cases} cases over ${selected.length} routes (${selected.map(([name]) => name).join(", ")}); statuses ${formatTally(statuses)}; ` +
      `error codes ${formatTally(codes)}; 507 budget refusals ${budgetRefusals}; ${accepted.length} accepted events, every block parsed back closed`,
  );
});
