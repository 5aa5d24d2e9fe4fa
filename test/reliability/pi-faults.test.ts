/**
 * The extension in a REAL Pi session (SDK + faux model), switched on with `/anon-notify`, talking to
 * the real notify-webhook (Koishi, SQLite, log persona) through a fault proxy on loopback. For each
 * fault — webhook down (connection refused), black-holed (accepts, never answers), slow, 429 with
 * `Retry-After` in seconds and as an HTTP date, 5xx, connections reset, a `failed` receipt — a run
 * completes while the fault holds:
 *   - `prompt()` resolves while the webhook is still faulty (the agent never waits on the network);
 *   - a 429's `Retry-After` is honoured in both forms (the retry comes no earlier than it says);
 *   - the final notice is not lost: once the fault clears, it is delivered — by the same process's
 *     retries, or from the outbox by the next Pi start — and the persona is handed it exactly once
 *     (server idempotency + outbox), and the outbox ends empty;
 *   - the token appears in none of the extension's messages.
 *
 * With RELIABILITY=long each fault also runs TURNS prompts and reports the wall-time ratio of the
 * prompts against the same prompts with a healthy webhook (a figure for docs/reliability.md, not an
 * assertion: timing belongs to benchmarks).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { readdirSync, rmSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import type { AddressInfo } from "node:net";
import { request } from "undici";
import { dataDirFor } from "../../extension/config/config.ts";
import { AUDIT_TABLE } from "../../server/audit.ts";
import { EVENT_TABLE } from "../../server/event-store.ts";
import { extensionEnv, writeUserConfig } from "../helpers/extension-env.ts";
import { freePort, startKoishi, type KoishiHarness } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi, type PiHarness } from "../../harness/pi.ts";
import { eventually } from "../../harness/event-client.ts";
import { LONG } from "./support.ts";

type Fault = "down" | "black-holed" | "slow" | "429 seconds" | "429 date" | "5xx" | "reset" | "failed receipt";
type Mode = Fault | "healthy";
const FAULTS: Fault[] = ["down", "black-holed", "slow", "429 seconds", "429 date", "5xx", "reset", "failed receipt"];
const SLOW_MS = 800;
const RETRY_AFTER_S = 1;
const TURNS = Number(process.env.FAULT_TURNS ?? 200);
const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 5);

/** A proxy on loopback in front of the real server that can be switched into each fault. */
async function startFaultProxy(target: string) {
  const port = await freePort();
  let mode: Mode = "healthy";
  const held = new Set<ServerResponse>();
  const eventPosts: { eventId: string; mode: Mode; at: number }[] = [];
  let server: Server | undefined;

  const forward = async (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const headers: Record<string, string> = {};
    for (const name of ["authorization", "content-type", "idempotency-key", "accept"]) {
      const value = req.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    try {
      const answer = await request(`${new URL(target).origin}${req.url}`, { method: req.method as "GET", headers, ...(req.method === "GET" ? {} : { body }) });
      const text = await answer.body.text();
      const out: Record<string, string> = { "content-type": "application/json" };
      if (answer.headers["retry-after"]) out["retry-after"] = String(answer.headers["retry-after"]);
      res.writeHead(answer.statusCode, out).end(text);
    } catch {
      res.destroy();
    }
  };

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));

  const listen = async () => {
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const now = mode;
      const isEvent = req.method === "POST" && req.url?.endsWith("/events");
      if (isEvent) eventPosts.push({ eventId: JSON.parse(body.toString("utf8")).event_id, mode: now, at: performance.now() });
      switch (now) {
        case "black-holed":
          held.add(res);
          return;
        case "reset":
          req.socket.resetAndDestroy();
          return;
        case "5xx":
          return json(res, 502, { error: "internal_error" });
        case "429 seconds":
          return json(res, 429, { error: "rate_limited" }, { "retry-after": String(RETRY_AFTER_S) });
        case "429 date":
          // An HTTP date has whole seconds: one second ahead of the next full second.
          return json(res, 429, { error: "rate_limited" }, { "retry-after": new Date(Math.ceil(Date.now() / 1000) * 1000 + RETRY_AFTER_S * 1000).toUTCString() });
        case "failed receipt":
          if (isEvent) return json(res, 202, { event_id: JSON.parse(body.toString("utf8")).event_id, state: "failed", duplicate: false });
          return forward(req, res, body);
        case "slow":
          await delay(SLOW_MS);
          return forward(req, res, body);
        default:
          return forward(req, res, body);
      }
    });
    server.on("connection", (socket) => socket.on("error", () => {}));
    await new Promise<void>((resolve) => server!.listen(port, "127.0.0.1", resolve));
  };
  const close = async () => {
    if (!server) return;
    for (const res of held) res.destroy();
    held.clear();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
  };
  await listen();
  return {
    endpoint: `http://127.0.0.1:${port}${new URL(target).pathname}/events`,
    eventPosts,
    get mode() {
      return mode;
    },
    async set(next: Mode) {
      if (next === "down") await close();
      else if (!server) await listen();
      // Leaving the black hole: the held requests end as broken connections.
      if (mode === "black-holed" && next !== "black-holed") {
        for (const res of held) res.destroy();
        held.clear();
      }
      mode = next;
    },
    close,
  };
}

interface Setup {
  koishi: KoishiHarness;
  proxy: Awaited<ReturnType<typeof startFaultProxy>>;
  root: string;
}

async function setup(t: import("node:test").TestContext): Promise<Setup> {
  const koishi = await startKoishi({ config: { logPersona: true, eventsPerMinute: 100_000, eventBurst: 100_000, watchdogEnabled: false } });
  const proxy = await startFaultProxy(koishi.baseUrl);
  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, extensionEnv(koishi, root), { ANON_NOTIFY_ENDPOINT: proxy.endpoint });
  writeUserConfig(root, { delivery: { timeoutMs: 2000, maxAttempts: 3, backoffMs: 50 } });
  t.after(async () => {
    process.env = saved;
    await proxy.close();
    await koishi.stop();
    rmSync(root, { recursive: true, force: true });
  });
  return { koishi, proxy, root };
}

async function activePi(root: string): Promise<PiHarness> {
  const pi = await startPi({ root });
  await pi.prompt("/anon-notify");
  return pi;
}

const outboxFiles = (root: string) => {
  try {
    return readdirSync(join(dataDirFor(join(root, "agent")), "outbox")).filter((name) => !name.startsWith("."));
  } catch {
    return [];
  }
};

/** How often the persona was handed each event of a session. */
async function handovers(koishi: KoishiHarness, sessionId: string): Promise<Map<string, number>> {
  const db = koishi.app.database;
  const ids = (await db.get(EVENT_TABLE, { session_id: sessionId }, ["event_id"])).map((row) => row.event_id);
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const row of await db.get(AUDIT_TABLE, { action: "event.handed_to_persona", subject: ids.length ? ids : ["none"] }, ["subject"])) {
    counts.set(row.subject!, (counts.get(row.subject!) ?? 0) + 1);
  }
  return counts;
}

for (const fault of FAULTS) {
  test(`webhook ${fault}: prompt() resolves during the fault, the final notice reaches the persona once after it clears`, { timeout: 60_000 }, async (t) => {
    const { koishi, proxy, root } = await setup(t);
    const pi = await activePi(root);
    const sessionId = pi.session.sessionManager.getSessionId();
    await proxy.set(fault);
    pi.script([ai.fauxAssistantMessage(`在 ${fault} 下完成。`)]);
    await pi.prompt(`run under ${fault}`);
    assert.equal(proxy.mode, fault, "prompt() resolved while the fault still held");
    assert.equal((await handovers(koishi, sessionId)).size, 0, "nothing had reached the server when prompt() resolved");

    if (fault === "429 seconds" || fault === "429 date") {
      // Two refused attempts: the second came no earlier than the first's Retry-After allowed.
      await eventually(() => (proxy.eventPosts.length >= 2 ? true : undefined), "the retry after the 429", 1000);
      const [first, second] = proxy.eventPosts;
      assert.ok(second!.at - first!.at >= RETRY_AFTER_S * 1000 - 50, `Retry-After honoured: ${Math.round(second!.at - first!.at)} ms between attempts`);
    }
    if (fault === "slow") {
      // Slow but within the timeout: the same process delivers it.
      await eventually(async () => ((await handovers(koishi, sessionId)).size === 1 ? true : undefined), "the slow notice delivered", 1000);
    }
    await pi.dispose({ keepRoot: true });
    if (fault !== "slow") {
      // Kept, and released by the stopped process (a claim still held would be left to its owner).
      const kept = await eventually(() => {
        const files = outboxFiles(root);
        return files.every((name) => name.endsWith(".json")) ? files : undefined;
      }, `the ${fault} run's outbox entry released`, 500);
      assert.equal(kept.length, 1, `the undelivered final notice is kept in the outbox (${fault})`);
    }
    await proxy.set("healthy");

    // A new Pi start (any session) sends what the outbox holds.
    const next = await startPi({ root });
    t.after(() => next.dispose({ keepRoot: true }));
    const counts = await eventually(async () => {
      const seen = await handovers(koishi, sessionId);
      return seen.size === 1 && [...seen.values()][0] === 1 ? seen : undefined;
    }, `the final notice of the ${fault} run reached the persona`, 1500);
    await delay(300); // time for a second hand-over to show up, if one were coming
    assert.deepEqual([...(await handovers(koishi, sessionId)).values()], [1], "handed to the persona exactly once");
    await eventually(() => (outboxFiles(root).length === 0 ? true : undefined), "the outbox is empty again");
    const [eventId] = counts.keys();
    const texts = [...pi.ui, ...next.ui].map((call) => JSON.stringify(call.args)).join("\n");
    assert.ok(!texts.includes(koishi.token), "no token in the extension's messages");
    t.diagnostic(`${fault}: ${proxy.eventPosts.filter((p) => p.eventId === eventId).length} POSTs of ${eventId}, persona handed it once`);
  });
}

test("turn wall time under each fault against a healthy webhook (figures; RELIABILITY=long)", { skip: !LONG, timeout: 60 * 60_000 }, async (t) => {
  const { proxy, root } = await setup(t);
  const ratios: string[] = [];
  const measure = async (mode: Mode): Promise<number> => {
    await proxy.set("healthy");
    const pi = await activePi(root);
    await proxy.set(mode);
    pi.script(Array.from({ length: TURNS }, (_, i) => ai.fauxAssistantMessage(`第 ${i} 轮完成。`)));
    const started = performance.now();
    for (let i = 0; i < TURNS; i++) await pi.prompt(`turn ${i}`);
    const elapsed = performance.now() - started;
    await proxy.set("healthy");
    await pi.dispose({ keepRoot: true });
    return elapsed;
  };
  await measure("healthy"); // warm-up
  const perFault = new Map<Fault, { ratio: number; faulty: number; healthy: number }[]>(FAULTS.map((fault) => [fault, []]));
  for (let round = 0; round < ROUNDS; round++) {
    for (const fault of FAULTS) {
      const [healthyA, faulty, healthyB] = [await measure("healthy"), await measure(fault), await measure("healthy")];
      const healthy = (healthyA + healthyB) / 2;
      perFault.get(fault)!.push({ ratio: faulty / healthy, faulty, healthy });
    }
  }
  for (const [fault, samples] of perFault) {
    const median = samples.sort((a, b) => a.ratio - b.ratio)[Math.floor(samples.length / 2)]!;
    ratios.push(`${fault} ${median.ratio.toFixed(3)} (${(median.faulty / TURNS).toFixed(2)} vs ${(median.healthy / TURNS).toFixed(2)} ms/turn)`);
  }
  t.diagnostic(`${TURNS} turns, median of ${ROUNDS} interleaved rounds; prompt wall time under fault / healthy: ${ratios.join("; ")}`);
});
