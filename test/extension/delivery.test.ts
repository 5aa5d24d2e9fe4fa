import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { once } from "node:events";
import { createServer, type IncomingMessage, type IncomingHttpHeaders, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";
import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { z } from "zod";
import { retryAfterDelayMs } from "../../common/backoff.ts";
import { classifyHttpFailure, ServerError, runWithRetry, type Sleep } from "../../extension/server-client/retry.ts";
import { createWebhookClient, type WebhookClient } from "../../extension/server-client/http-client.ts";
import { Notifier, nonFinalAllowed } from "../../extension/notices/notifier.ts";
import { Outbox } from "../../extension/notices/outbox.ts";
import { EventBody } from "../../protocol/events.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { firstLine, waitUntil } from "../../harness/wait.ts";

const TOKEN = "t0ken-that-must-never-leak";
const cleanups: (() => unknown)[] = [];
after(async () => {
  for (const cleanup of cleanups.reverse()) await cleanup();
});

// ── fixtures ────────────────────────────────────────────────────────────────

type Handler = (req: IncomingMessage, res: ServerResponse, body: string) => void;
interface Received {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

const accept: Handler = (_req, res, body) => {
  const { event_id } = JSON.parse(body) as { event_id: string };
  res.writeHead(202, { "content-type": "application/json" }).end(JSON.stringify({ event_id, state: "queued", duplicate: false }));
};
const status =
  (code: number, headers: Record<string, string> = {}, body: unknown = { error: code === 429 ? "rate_limited" : "internal_error" }): Handler =>
  (_req, res) =>
    res.writeHead(code, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));
const reset: Handler = (req) => req.socket.destroy();
const blackHole: Handler = () => {};

/** A real HTTP server on 127.0.0.1:0 answering each request with the next handler (the last one repeats). */
async function scriptedServer(...script: Handler[]) {
  const received: Received[] = [];
  const server = createServer((req, res) => {
    let body = "";
    req.setEncoding("utf8");
    req.on("data", (chunk: string) => (body += chunk));
    req.on("end", () => {
      received.push({ method: req.method!, url: req.url!, headers: req.headers, body });
      const handler = script[Math.min(received.length - 1, script.length - 1)]!;
      handler(req, res, body);
    });
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  const { port } = server.address() as AddressInfo;
  const close = async () => {
    server.closeAllConnections();
    server.close();
    await once(server, "close").catch(() => undefined);
  };
  cleanups.push(close);
  return { endpoint: `http://127.0.0.1:${port}${API_BASE_PATH}/events`, received, close, port };
}

function client(endpoint: string, timeoutMs = 5_000, now?: () => number): WebhookClient {
  const c = createWebhookClient({ endpoint, token: TOKEN, timeoutMs, ...(now ? { now } : {}) });
  cleanups.push(() => c.close());
  return c;
}

let counter = 0;
function event(status: EventBody["status"] = "completed", id = `pi:s1:run:${++counter}`): EventBody {
  return EventBody.parse({
    event_id: id,
    session_id: "s1",
    source: "Pi Agent · demo",
    task: "task",
    status,
    summary: "summary",
    created_at: "2026-11-30T03:00:00.000Z",
  });
}

/** Records the waits instead of waiting. */
function fakeSleep(): Sleep & { waits: number[] } {
  const waits: number[] = [];
  const sleep = (async (ms: number, signal?: AbortSignal) => {
    waits.push(ms);
    if (signal?.aborted) throw new Error("aborted");
  }) as Sleep & { waits: number[] };
  sleep.waits = waits;
  return sleep;
}
const noSleepAllowed: Sleep = async () => assert.fail("a permanent failure must not wait for a retry");

function tempOutboxDir(): string {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-delivery-"));
  cleanups.push(() => rmSync(root, { recursive: true, force: true }));
  return join(root, "outbox");
}

function logger() {
  const lines = { info: [] as string[], warn: [] as string[], debug: [] as string[] };
  return {
    lines,
    log: {
      info: (m: string) => lines.info.push(m),
      warn: (m: string) => lines.warn.push(m),
      debug: (m: string) => lines.debug.push(m),
    },
  };
}

const delivery = { ...DEFAULT_CONFIG.delivery, maxAttempts: 3, backoffMs: 100 };
const zh = messagesFor("zh-CN").delivery;

function notifierFor(endpoint: string, options: { dir?: string; now?: () => number; sleep?: Sleep; timeoutMs?: number; outboxRetryMs?: number } = {}) {
  const dir = options.dir ?? tempOutboxDir();
  const { lines, log } = logger();
  const outbox = new Outbox(dir, { movedAside: (file, why) => log.warn(`${file}: ${why}`) });
  const notifier = new Notifier({
    client: client(endpoint, options.timeoutMs),
    outbox,
    delivery,
    log,
    text: messagesFor("zh-CN").delivery,
    sleep: options.sleep ?? fakeSleep(),
    random: () => 0.5,
    ...(options.now ? { now: options.now } : {}),
    ...(options.outboxRetryMs ? { outboxRetryMs: options.outboxRetryMs } : {}),
  });
  cleanups.push(async () => {
    await notifier.close();
    await outbox.close();
  });
  return { notifier, outbox, dir, lines };
}

const outboxIds = async (dir: string) => (await new Outbox(dir, { movedAside: () => {} }).list()).map((e) => e.event.event_id);

// ── the policy ──────────────────────────────────────────────────────────────

test("HTTP failures: 408, 425, 429 and 5xx are retryable, other 4xx are not", () => {
  const now = Date.UTC(2026, 10, 30, 3, 0, 0);
  const cases: [number, boolean][] = [
    [408, true],
    [425, true],
    [429, true],
    [500, true],
    [502, true],
    [503, true],
    [504, true],
    [599, true],
    [400, false],
    [401, false],
    [403, false],
    [404, false],
    [409, false],
    [413, false],
    [422, false],
  ];
  for (const [code, retryable] of cases) {
    const error = classifyHttpFailure(code, {}, now);
    assert.ok(error instanceof ServerError);
    assert.equal(error.retryable, retryable, String(code));
    assert.equal(error.status, code);
  }
  assert.equal(classifyHttpFailure(429, { "retry-after": "7" }, now, "rate_limited").retryAfterMs, 7_000);
  assert.equal(classifyHttpFailure(429, {}, now, "rate_limited").code, "rate_limited");
  assert.equal(classifyHttpFailure(400, { "retry-after": "7" }, now).retryAfterMs, undefined, "a permanent failure has no wait");
});

test("Retry-After is read as seconds or an HTTP date and capped at 60 s", () => {
  const now = Date.UTC(2026, 10, 30, 3, 0, 0);
  const cases: [string | string[] | undefined, number | undefined][] = [
    ["0", 0],
    ["2", 2_000],
    [" 30 ", 30_000],
    ["61", 60_000],
    ["86400", 60_000],
    [new Date(now + 5_000).toUTCString(), 5_000],
    [new Date(now - 5_000).toUTCString(), 0],
    [new Date(now + 3_600_000).toUTCString(), 60_000],
    [["3", "9"], 3_000],
    ["soon", undefined],
    ["-1", undefined],
    ["", undefined],
    [undefined, undefined],
  ];
  for (const [header, expected] of cases) assert.equal(retryAfterDelayMs(header, now), expected, JSON.stringify(header));
});

test("runWithRetry retries retryable failures with backoff, honours Retry-After, and returns a value", async () => {
  const sleep = fakeSleep();
  const failures = [new ServerError("busy", { retryable: true }), new ServerError("slow down", { retryable: true, retryAfterMs: 4_000 })];
  const result = await runWithRetry(
    async (n) => {
      const failure = failures[n - 1];
      if (failure) throw failure;
      return "sent";
    },
    { maxAttempts: 3, backoffMs: 1_000, sleep, random: () => 0 },
  );
  assert.deepEqual(result, { ok: true, value: "sent", attempts: 3 });
  assert.deepEqual(sleep.waits, [500, 4_000], "jittered backoff, then the server's wait");
});

test("runWithRetry stops at once on a permanent failure or a bug, and after maxAttempts otherwise", async () => {
  const permanent = new ServerError("bad request", { retryable: false, status: 400 });
  const cases: [unknown, number, number, boolean][] = [
    [permanent, 3, 1, false],
    [new TypeError("x is undefined"), 3, 1, false],
    [new ServerError("down", { retryable: true }), 3, 3, true],
    [new ServerError("down", { retryable: true }), 1, 1, true],
  ];
  for (const [thrown, maxAttempts, expectedAttempts, retryable] of cases) {
    let calls = 0;
    const result = await runWithRetry(
      async () => {
        calls += 1;
        throw thrown;
      },
      { maxAttempts, backoffMs: 10, sleep: retryable ? fakeSleep() : noSleepAllowed, random: Math.random },
    );
    assert.equal(result.ok, false);
    assert.equal(calls, expectedAttempts);
    assert.equal(result.attempts, expectedAttempts);
    if (!result.ok) {
      assert.ok(result.error instanceof ServerError);
      assert.equal(result.error.retryable, retryable);
      if (thrown instanceof ServerError) assert.equal(result.error, thrown);
    }
  }
});

test("runWithRetry ends with an aborted result when its signal fires during a wait", async () => {
  const controller = new AbortController();
  const result = await runWithRetry(
    async () => {
      throw new ServerError("down", { retryable: true });
    },
    {
      maxAttempts: 5,
      backoffMs: 10,
      random: Math.random,
      signal: controller.signal,
      sleep: async (_ms, signal) => {
        controller.abort();
        if (signal?.aborted) throw new Error("aborted");
      },
    },
  );
  assert.equal(result.ok, false);
  assert.equal(result.attempts, 1);
  if (!result.ok) assert.equal(result.error.code, "aborted");
});

test("nonFinalAllowed keeps the minimum interval between progress-type notices", () => {
  const cases: [number | undefined, number, number, boolean][] = [
    [undefined, 0, 300_000, true],
    [1_000, 1_000, 300_000, false],
    [1_000, 300_999, 300_000, false],
    [1_000, 301_000, 300_000, true],
    [1_000, 1_000, 0, true],
  ];
  for (const [last, now, min, allowed] of cases) assert.equal(nonFinalAllowed(last, now, min), allowed, `${last} ${now} ${min}`);
});

// ── the client against a real server ───────────────────────────────────────

test("postEvent sends the bearer token, the Idempotency-Key and the body, and returns the receipt", async () => {
  const server = await scriptedServer(accept);
  const e = event();
  const accepted = await client(server.endpoint).postEvent(e);
  assert.deepEqual(accepted, { event_id: e.event_id, state: "queued", duplicate: false });
  const [request] = server.received;
  assert.equal(request?.method, "POST");
  assert.equal(request?.url, `${API_BASE_PATH}/events`);
  assert.equal(request?.headers.authorization, `Bearer ${TOKEN}`);
  assert.equal(request?.headers["idempotency-key"], e.event_id);
  assert.equal(request?.headers["content-type"], "application/json");
  assert.deepEqual(JSON.parse(request!.body), e);
});

test("postEvent failures are classified: status, retryability and server code; the token never appears", async () => {
  const now = Date.UTC(2026, 10, 30, 3, 0, 0);
  const otherId: Handler = (_req, res) => res.writeHead(202).end(JSON.stringify({ event_id: "pi:other", state: "queued", duplicate: false }));
  const cases: [string, Handler, Partial<ServerError>][] = [
    ["429 with seconds", status(429, { "retry-after": "3" }), { retryable: true, status: 429, retryAfterMs: 3_000, code: "rate_limited" }],
    ["429 with a date", status(429, { "retry-after": new Date(now + 8_000).toUTCString() }), { retryable: true, retryAfterMs: 8_000 }],
    ["503", status(503, {}, { error: "not_ready" }), { retryable: true, status: 503, code: "not_ready" }],
    ["500 without a body", (_req, res) => res.writeHead(500).end(), { retryable: true, code: "http_500" }],
    ["400", status(400, {}, { error: "invalid_request", issues: [] }), { retryable: false, status: 400, code: "invalid_request" }],
    ["401", status(401, {}, { error: "unauthorized" }), { retryable: false, status: 401, code: "unauthorized" }],
    ["422", status(422, {}, { error: "idempotency_key_reused" }), { retryable: false, code: "idempotency_key_reused" }],
    ["connection reset", reset, { retryable: true }],
    [
      "failed receipt",
      (_req, res, body) => res.writeHead(202).end(JSON.stringify({ event_id: JSON.parse(body).event_id, state: "failed", duplicate: true })),
      { retryable: false, code: "receipt_failed" },
    ],
    [
      "invalid JSON answer",
      (_req, res) => res.writeHead(202, { "content-type": "application/json" }).end("<html>proxy</html>"),
      { retryable: false, status: 202, code: "invalid_answer" },
    ],
    ["answer of the wrong shape", (_req, res) => res.writeHead(200).end(JSON.stringify({ ok: true })), { retryable: false, code: "invalid_answer" }],
    ["answer for another event", otherId, { retryable: false, code: "invalid_answer" }],
  ];
  for (const [name, handler, expected] of cases) {
    const server = await scriptedServer(handler);
    const error = await client(server.endpoint, 5_000, () => now)
      .postEvent(event())
      .then(
        () => assert.fail(`${name}: expected a failure`),
        (e: unknown) => e,
      );
    assert.ok(error instanceof ServerError, name);
    for (const [key, value] of Object.entries(expected)) assert.equal((error as unknown as Record<string, unknown>)[key], value, `${name}: ${key}`);
    assert.ok(!error.message.includes(TOKEN) && !String(error.stack).includes(TOKEN), `${name}: no token`);
    await server.close();
  }
});

test("a black-holed server times out as a retryable error; a closed port is a retryable network error", async () => {
  const hole = await scriptedServer(blackHole);
  const timedOut = await client(hole.endpoint, 150)
    .postEvent(event())
    .catch((e: unknown) => e);
  assert.ok(timedOut instanceof ServerError);
  assert.equal(timedOut.code, "timeout");
  assert.equal(timedOut.retryable, true);

  const gone = await scriptedServer(accept);
  await gone.close();
  const refused = await client(gone.endpoint)
    .postEvent(event())
    .catch((e: unknown) => e);
  assert.ok(refused instanceof ServerError);
  assert.equal(refused.code, "ECONNREFUSED");
  assert.equal(refused.retryable, true);
  assert.ok(!refused.message.includes(TOKEN));
});

test("request derives the URL from the endpoint, adds the query and validates the answer", async () => {
  const server = await scriptedServer((_req, res) => res.writeHead(200).end(JSON.stringify({ command: null })));
  const answer = await client(server.endpoint).request("GET", "commands", {
    query: { session_id: "s1", wait_ms: 0, capabilities: undefined },
    schema: z.object({ command: z.null() }),
  });
  assert.deepEqual(answer, { command: null });
  assert.equal(server.received[0]?.url, `${API_BASE_PATH}/commands?session_id=s1&wait_ms=0`);
  assert.equal(server.received[0]?.headers.authorization, `Bearer ${TOKEN}`);
  assert.equal(server.received[0]?.headers["idempotency-key"], undefined);

  const controller = new AbortController();
  controller.abort();
  const error = await client(server.endpoint)
    .request("GET", "health", { schema: z.unknown(), signal: controller.signal })
    .catch((e: unknown) => e);
  assert.ok(error instanceof ServerError);
  assert.equal(error.code, "aborted");
  assert.equal(error.retryable, false);
});

// ── the notifier ────────────────────────────────────────────────────────────

test("a final notice is put, then sent, then removed: on disk and claimed at every attempt, gone once accepted", async () => {
  const dir = tempOutboxDir();
  const seen: { files: string[]; record: unknown }[] = [];
  const observing =
    (handler: Handler): Handler =>
    (req, res, body) => {
      const files = readdirSync(dir);
      const record = files.length === 1 ? JSON.parse(readFileSync(join(dir, files[0]!), "utf8")) : undefined;
      seen.push({ files, record });
      handler(req, res, body);
    };
  const server = await scriptedServer(observing(status(503)), observing(accept));
  const { notifier } = notifierFor(server.endpoint, { dir });
  const e = event("completed");
  assert.equal(notifier.send(e, { final: true }), undefined, "send returns at once");
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.equal(server.received.length, 2);
  for (const [attempt, { files, record }] of seen.entries()) {
    assert.equal(files.length, 1, `attempt ${attempt + 1}: exactly the one entry, no temp file`);
    assert.match(files[0]!, /\.sending$/, `attempt ${attempt + 1}: claimed while it is sent`);
    assert.deepEqual((record as { event: unknown }).event, e, `attempt ${attempt + 1}: the whole record is on disk before the request`);
  }
  assert.deepEqual(readdirSync(dir), [], "removed after the server accepted it");
});

test("429 with Retry-After, then 500, then success: one notice, three attempts, the server's wait honoured", async () => {
  const server = await scriptedServer(status(429, { "retry-after": "2" }), status(500), accept);
  const sleep = fakeSleep();
  const { notifier, dir, lines } = notifierFor(server.endpoint, { sleep });
  notifier.send(event("failed"), { final: true });
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.equal(server.received.length, 3);
  assert.equal(sleep.waits[0], 2_000);
  assert.equal(sleep.waits.length, 2);
  assert.deepEqual(await outboxIds(dir), []);
  assert.deepEqual(lines.warn, [zh.paced], "the pacing is said; no warning for the notice");
});

test("pacing (429) is said once per episode, which ends when the line drained; a final held back by it is kept, not warned about", async () => {
  const paced = status(429, { "retry-after": "1" });
  // e1: three 429s, its attempts spent (held back in the outbox), then resent; e2: one 429, then taken.
  const server = await scriptedServer(paced, paced, paced, accept, paced, accept);
  const { notifier, dir, lines } = notifierFor(server.endpoint);
  const e1 = event("completed");
  notifier.send(e1, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(await outboxIds(dir), [e1.event_id], "kept in the outbox for a resend");
  await notifier.resendOutbox();
  assert.deepEqual(await outboxIds(dir), [], "the resend delivered it");
  assert.deepEqual(lines.warn, [zh.paced], "one episode (the held final kept it open): said once, nothing per notice");
  notifier.send(event("completed"), { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(lines.warn, [zh.paced, zh.paced], "a new episode: said again");
  assert.equal(server.received.length, 6);
});

test("a 400 is not retried; the final stays in the outbox and the failure is logged without the token", async () => {
  const server = await scriptedServer(status(400, {}, { error: "invalid_request" }));
  const { notifier, dir, lines } = notifierFor(server.endpoint, { sleep: noSleepAllowed });
  const e = event("completed");
  notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.equal(server.received.length, 1);
  assert.deepEqual(await outboxIds(dir), [e.event_id]);
  assert.equal(lines.warn.length, 1);
  assert.match(lines.warn[0]!, /invalid_request/);
  assert.ok(!lines.warn[0]!.includes(TOKEN));
});

test("with the server down the final is kept, and a later resend delivers it once the server is back", async () => {
  const down = await scriptedServer(status(503, {}, { error: "not_ready" }));
  const dir = tempOutboxDir();
  const first = notifierFor(down.endpoint, { dir });
  const e = event("completed");
  first.notifier.send(e, { final: true });
  assert.equal(await first.notifier.flush(5_000), true, "every send was done with");
  assert.equal(down.received.length, delivery.maxAttempts);
  assert.deepEqual(await outboxIds(dir), [e.event_id]);

  const up = await scriptedServer(accept);
  const second = notifierFor(up.endpoint, { dir });
  await second.notifier.resendOutbox();
  assert.deepEqual(
    up.received.map((r) => JSON.parse(r.body).event_id),
    [e.event_id],
  );
  assert.deepEqual(await outboxIds(dir), []);
});

test("a final survives a crash of the Pi process mid-send and the next start resends it", async (t) => {
  const hole = await scriptedServer(blackHole);
  const dir = tempOutboxDir();
  const here = (file: string) => JSON.stringify(fileURLToPath(new URL(`../../${file}`, import.meta.url)));
  const e = event("completed");
  const child = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { Notifier } from ${here("extension/notices/notifier.ts")};
       import { createWebhookClient } from ${here("extension/server-client/http-client.ts")};
       import { Outbox } from ${here("extension/notices/outbox.ts")};
       import { messagesFor } from ${here("extension/texts/messages.ts")};
       const notifier = new Notifier({
         client: createWebhookClient({ endpoint: ${JSON.stringify(hole.endpoint)}, token: "t", timeoutMs: 60000 }),
         outbox: new Outbox(${JSON.stringify(dir)}, { movedAside: console.warn }),
         delivery: ${JSON.stringify(delivery)},
         log: console,
         text: messagesFor("zh-CN").delivery,
       });
       notifier.send(${JSON.stringify(e)}, { final: true });
       process.stdout.write("sent\\n");`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  t.after(() => child.kill("SIGKILL"));
  assert.equal(await firstLine(child, "the child sent its final"), "sent");
  // Wait until the request is really in flight (the server holds it), then kill without any cleanup.
  await waitUntil(() => hole.received.length > 0, "the child's final reached the black-holed server");
  child.kill("SIGKILL");
  await once(child, "exit");
  assert.ok(
    readdirSync(dir).some((f) => f.endsWith(".sending")),
    "the dead process still holds its claim",
  );

  const up = await scriptedServer(accept);
  const next = notifierFor(up.endpoint, { dir });
  await next.notifier.resendOutbox();
  assert.deepEqual(
    up.received.map((r) => JSON.parse(r.body).event_id),
    [e.event_id],
  );
  assert.equal(up.received[0]?.headers["idempotency-key"], e.event_id);
  assert.deepEqual(await outboxIds(dir), []);
});

test("one notifier never sends the same event twice: repeated send, send after acceptance, resend during flight", async () => {
  const server = await scriptedServer(accept);
  const { notifier, dir } = notifierFor(server.endpoint);
  const e = event("completed");
  notifier.send(e, { final: true });
  notifier.send(e, { final: true });
  void notifier.resendOutbox();
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  notifier.send(e, { final: true });
  await notifier.resendOutbox();
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.equal(server.received.length, 1);
  assert.deepEqual(await outboxIds(dir), []);
});

test("progress-type notices respect the minimum interval; finals and explicit requests bypass it; order is kept", async () => {
  const server = await scriptedServer(accept);
  let clock = 1_000_000;
  const { notifier, lines } = notifierFor(server.endpoint, { now: () => clock });
  const warning = event("warning");
  const started = event("started");
  const progress1 = event("progress");
  const info = event("info");
  const completed = event("completed");
  const progress2 = event("progress");
  notifier.send(warning, { final: false, throttled: false }); // explicit: does not use up the interval
  notifier.send(started, { final: false });
  notifier.send(progress1, { final: false }); // same instant: dropped
  notifier.send(info, { final: false, throttled: false }); // explicit: never held back
  notifier.send(completed, { final: true }); // final: never rate limited
  clock += delivery.minIntervalMs;
  notifier.send(progress2, { final: false });
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.deepEqual(
    server.received.map((r) => JSON.parse(r.body).event_id),
    [warning.event_id, started.event_id, info.event_id, completed.event_id, progress2.event_id],
  );
  assert.ok(
    lines.debug.some((l) => l.includes(progress1.event_id)),
    "the drop is logged at debug",
  );
});

test("resendOutbox sends oldest first, prunes expired entries with a log line, and stops when the server is down", async () => {
  const server = await scriptedServer(accept);
  const dir = tempOutboxDir();
  const seed = new Outbox(dir, { movedAside: () => {} });
  const now = Date.UTC(2026, 10, 30, 3, 0, 0);
  const expired = event("failed");
  const older = event("completed");
  const newer = event("completed");
  await seed.put(newer, now - 1_000);
  await seed.put(expired, now - delivery.outboxMaxAgeMs - 1);
  await seed.put(older, now - 2_000);
  await seed.close();
  const { notifier, lines } = notifierFor(server.endpoint, { dir, now: () => now });
  await notifier.resendOutbox();
  assert.deepEqual(
    server.received.map((r) => JSON.parse(r.body).event_id),
    [older.event_id, newer.event_id],
  );
  assert.ok(
    lines.warn.some((l) => l.includes(expired.event_id)),
    "the pruned event is named",
  );
  assert.deepEqual(await outboxIds(dir), []);

  const down = await scriptedServer(status(503));
  const again = new Outbox(tempOutboxDir(), { movedAside: () => {} });
  await again.put(event("completed"), now - 2_000);
  await again.put(event("completed"), now - 1_000);
  const stuck = notifierFor(down.endpoint, { dir: again.dir, now: () => now });
  await again.close();
  await stuck.notifier.resendOutbox();
  assert.equal(down.received.length, delivery.maxAttempts, "the second entry is not tried against a server that is down");
  assert.equal((await outboxIds(stuck.dir)).length, 2);
});

test("send never throws: an invalid event is logged and nothing is sent", async () => {
  const server = await scriptedServer(accept);
  const { notifier, dir, lines } = notifierFor(server.endpoint);
  const bad = { ...event("completed"), summary: "x".repeat(5_000) };
  assert.doesNotThrow(() => notifier.send(bad, { final: true }));
  assert.doesNotThrow(() => notifier.send(null as unknown as EventBody, { final: true }));
  assert.equal(await notifier.flush(5_000), true, "every send was done with");
  assert.equal(server.received.length, 0);
  assert.deepEqual(await outboxIds(dir), []);
  assert.equal(lines.warn.length, 2);
  assert.match(lines.warn[0]!, /summary/);
});

test("flush is bounded and close aborts a send in flight, leaving the final in the outbox", async () => {
  const hole = await scriptedServer(blackHole);
  const { notifier, outbox, dir } = notifierFor(hole.endpoint, { timeoutMs: 60_000 });
  const e = event("completed");
  notifier.send(e, { final: true });
  // The request goes out once the outbox write finished; the black hole then holds it.
  await waitUntil(() => hole.received.length > 0, "the final reached the black-holed server");
  assert.equal(await notifier.flush(50), false, "flush reports the time running out while the black hole holds the request");
  assert.equal(readdirSync(dir).filter((f) => f.endsWith(".sending")).length, 1, "still claimed while the black hole holds the request");
  await notifier.close();
  assert.equal(hole.received.length, 1);
  assert.ok(!readdirSync(dir).some((f) => f.endsWith(".sending")), "the claim is given back");

  const late = event("failed");
  notifier.send(late, { final: true });
  assert.equal(await notifier.flush(1_000), true, "a closed notifier is done with a late final at once");
  await outbox.close(); // the session's shutdown; the next start finds both
  assert.deepEqual(await outboxIds(dir), [e.event_id, late.event_id]);
  assert.equal(hole.received.length, 1, "a closed notifier only keeps finals for the next start");
});

test("a final held back by an outage goes first: a newer final of the session never overtakes it", async () => {
  const server = await scriptedServer(...Array.from({ length: delivery.maxAttempts }, () => status(503, {}, { error: "not_ready" })), accept);
  const { notifier, dir } = notifierFor(server.endpoint);
  const older = event("failed");
  const newer = event("completed");
  notifier.send(older, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(await outboxIds(dir), [older.event_id], "the older final waits in the outbox");
  notifier.send(newer, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  const acceptedOrder = server.received.slice(delivery.maxAttempts).map((r) => JSON.parse(r.body).event_id);
  assert.deepEqual(acceptedOrder, [older.event_id, newer.event_id]);
  assert.deepEqual(await outboxIds(dir), []);
});

test("held-back finals are resent as soon as the server answers again, and on a bounded timer", async () => {
  const script = [...Array.from({ length: delivery.maxAttempts }, () => status(503, {}, { error: "not_ready" })), accept];
  const answered = await scriptedServer(...script);
  const first = notifierFor(answered.endpoint);
  const e1 = event("completed");
  first.notifier.send(e1, { final: true });
  await first.notifier.flush(5_000);
  assert.equal(answered.received.length, delivery.maxAttempts);
  first.notifier.serverAnswered();
  await waitUntil(() => answered.received.length === delivery.maxAttempts + 1, "the held final resent after the server answered");
  assert.equal(JSON.parse(answered.received.at(-1)!.body).event_id, e1.event_id);
  await first.notifier.flush(5_000);
  assert.deepEqual(await outboxIds(first.dir), []);

  const timed = await scriptedServer(...script);
  const second = notifierFor(timed.endpoint, { outboxRetryMs: 50 });
  const e2 = event("completed");
  second.notifier.send(e2, { final: true });
  await waitUntil(() => timed.received.length === delivery.maxAttempts + 1, "the held final resent by the timer alone");
  assert.equal(JSON.parse(timed.received.at(-1)!.body).event_id, e2.event_id);
  await second.notifier.flush(5_000);
  assert.deepEqual(await outboxIds(second.dir), []);
});

// ── batches ─────────────────────────────────────────────────────────────────

/** A server with the batch route: single events answered with `batch_max`, batches taken whole unless `refuse` says otherwise. */
function batchServer(refuse?: (events: { event_id: string }[], call: number) => object | undefined): Handler {
  let calls = 0;
  return (req, res, body) => {
    calls += 1;
    const json = (code: number, answer: unknown) => res.writeHead(code, { "content-type": "application/json" }).end(JSON.stringify(answer));
    if (!req.url!.endsWith("/events/batch")) return json(202, { event_id: JSON.parse(body).event_id, state: "queued", duplicate: false, batch_max: 32 });
    const { events } = JSON.parse(body) as { events: { event_id: string }[] };
    const refused = refuse?.(events, calls);
    if (refused && "status" in refused && !("index" in refused)) return json(refused.status as number, { error: "internal_error" });
    const index = refused ? (refused as { index: number }).index : events.length;
    const accepted = events.slice(0, index).map(({ event_id }) => ({ event_id, state: "queued", duplicate: false }));
    json(200, { accepted, refused: refused ? { event_id: events[index]!.event_id, ...refused } : null });
  };
}

const sentIds = (received: Received[]) =>
  received.map((r) =>
    r.url.endsWith("/events/batch") ? (JSON.parse(r.body) as { events: { event_id: string }[] }).events.map((e) => e.event_id) : [JSON.parse(r.body).event_id],
  );

test("once the server said batch_max, what waits goes as one batch in order, each removed from the outbox", async () => {
  const server = await scriptedServer(batchServer());
  const { notifier, dir } = notifierFor(server.endpoint);
  const first = event("completed");
  notifier.send(first, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  const backlog = Array.from({ length: 5 }, (_, i) => event(i === 2 ? "started" : "completed"));
  for (const e of backlog) notifier.send(e, { final: e.status === "completed", throttled: false });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(
    sentIds(server.received),
    [[first.event_id], backlog.map((e) => e.event_id)],
    "one request for the five, finals and a progress notice in hand-over order",
  );
  assert.ok(server.received[1]!.url.endsWith("/events/batch"));
  assert.equal(server.received[1]!.headers["idempotency-key"], undefined, "each event's id is its key");
  assert.deepEqual(await outboxIds(dir), []);
  assert.deepEqual(readdirSync(dir), []);
});

test("a batch refusal: the accepted prefix is done, the refused event is retried after the server's wait, and nothing after it overtakes", async () => {
  const server = await scriptedServer(
    batchServer((_events, call) => (call === 2 ? { index: 1, status: 429, error: "rate_limited", retry_after_seconds: 2 } : undefined)),
  );
  const sleep = fakeSleep();
  const { notifier, dir } = notifierFor(server.endpoint, { sleep });
  notifier.send(event("completed"), { final: true });
  await notifier.flush(5_000);
  const [a, b, c] = [event("completed"), event("failed"), event("completed")];
  for (const e of [a, b, c]) notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(sentIds(server.received).slice(1), [
    [a.event_id, b.event_id, c.event_id],
    [b.event_id, c.event_id],
  ]);
  assert.deepEqual(sleep.waits, [2_000], "Retry-After of the refused event honoured");
  assert.deepEqual(await outboxIds(dir), []);
});

test("a batch the server keeps failing: the finals stay in the outbox, held back, and the next pass sends them oldest first", async () => {
  let down = true;
  const server = await scriptedServer(batchServer(() => (down ? { status: 503 } : undefined)));
  const { notifier, dir, lines } = notifierFor(server.endpoint);
  notifier.send(event("completed"), { final: true });
  await notifier.flush(5_000);
  const backlog = [event("completed"), event("failed"), event("completed")];
  for (const e of backlog) notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.equal(server.received.length, 1 + delivery.maxAttempts, "the batch tried maxAttempts times, not once per final");
  assert.deepEqual(
    await outboxIds(dir),
    backlog.map((e) => e.event_id),
    "all kept, oldest first",
  );
  assert.equal(lines.warn.length, 1, `one warning for the final that failed, not one per final: ${lines.warn.join(" | ")}`);
  down = false;
  notifier.serverAnswered();
  await waitUntil(async () => (await outboxIds(dir)).length === 0, "the held-back finals resent");
  assert.deepEqual(
    sentIds(server.received).at(-1),
    backlog.map((e) => e.event_id),
    "resent as one batch, oldest first",
  );
});

test("a server without the batch route (404) gets the same events again one by one", async () => {
  const single = batchServer();
  const server = await scriptedServer((req, res, body) => (req.url!.endsWith("/events/batch") ? status(404, {}, "")(req, res, body) : single(req, res, body)));
  const { notifier, dir } = notifierFor(server.endpoint, { sleep: noSleepAllowed });
  notifier.send(event("completed"), { final: true });
  await notifier.flush(5_000);
  const backlog = [event("completed"), event("completed")];
  for (const e of backlog) notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(sentIds(server.received).slice(1), [backlog.map((e) => e.event_id), [backlog[0]!.event_id], [backlog[1]!.event_id]]);
  assert.deepEqual(await outboxIds(dir), []);
});

test("an outbox that fails mid-send: one warning, the final stays on disk, and the same event handed over again is not taken for a duplicate", async () => {
  const server = await scriptedServer(accept);
  const { notifier, outbox, dir, lines } = notifierFor(server.endpoint);
  const claim = outbox.claim.bind(outbox);
  outbox.claim = async () => {
    throw new Error("EIO: the disk went away");
  };
  const e = event("completed");
  notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.equal(server.received.length, 0);
  assert.equal(lines.warn.length, 1, lines.warn.join(" | "));
  assert.match(lines.warn[0]!, /EIO/);
  assert.equal(readdirSync(dir).length, 1, "still on disk");
  outbox.claim = claim;
  notifier.send(e, { final: true });
  assert.equal(await notifier.flush(5_000), true);
  assert.deepEqual(sentIds(server.received), [[e.event_id]]);
  assert.deepEqual(readdirSync(dir), []);
});
