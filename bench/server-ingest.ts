/**
 * `npm run bench:server`: event ingest of the notify-webhook plugin on loopback.
 *
 * Two servers in the same run, each with its own SQLite file:
 * - "plugin": the real Koishi app (plugin-server, SQLite driver, notify-webhook) answering
 *   POST /events — token check, own body reading, zod validation, idempotency lookup, insert;
 * - "bare": a plain node:http handler doing the same work without Koishi's HTTP stack: read the
 *   body, validate it with the same schema, insert the same row through the same minato table, and
 *   force it to disk the same way before answering (`DiskSync`: one fdatasync shared by the rows
 *   written while the previous one ran), so both sides answer only what is on disk.
 * Both SQLite connections are held as `npm start` holds its own (`holdDatabaseFiles`: exclusive
 * locking), so the two sides differ only in what runs per request.
 * A kept-alive undici client sends CONCURRENCY requests at a time; rounds alternate between the two.
 * The worker is kept idle (no persona, long wait) so that only ingest is measured.
 * Reports throughput (events/s), p50/p99 latency, the CPU this process spent per event (client
 * included, the same on both sides; on a shared machine it moves less than throughput does), and
 * the plugin/bare throughput ratio.
 */
import { randomUUID } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createServer, type IncomingMessage } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Context, ForkScope, Plugin } from "koishi";
import { Pool } from "undici";
import { EventBody } from "../protocol/events.ts";
import { bodyHash, newEventRow } from "../server/events/receipt-rules.ts";
import { EVENT_TABLE, declareEventTable } from "../server/events/store.ts";
import { DiskSync, holdDatabaseFiles } from "../server/disk-sync.ts";
import { koishi } from "../server/koishi.ts";
import { freePort, startKoishi } from "../harness/koishi.ts";

// Many short rounds, alternating: on a shared machine the load changes within a minute, and
// finely interleaved rounds see the same load (3 × 2,000 gave ratios from 0.3 to 0.7 on one tree).
const EVENTS = Number(process.env.BENCH_EVENTS ?? 500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 9);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 8);

interface Target {
  name: "plugin" | "bare";
  origin: string;
  path: string;
  token: string;
}

function eventBody(): string {
  return JSON.stringify({
    event_id: `bench:${randomUUID()}`,
    session_id: "bench-session",
    source: "Pi Agent · bench",
    task: "基准测试",
    status: "completed",
    summary: "完成".repeat(100),
    details: { stop_reason: "stop" },
    url: null,
    context_usage: { used_tokens: 48000, context_window: 200000, percent: 24 },
    created_at: new Date().toISOString(),
  });
}

async function readAll(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
  return Buffer.concat(chunks).toString("utf8");
}

/** The bare baseline: node:http + the same schema + the same table, in its own Koishi database. */
async function startBare(dir: string) {
  const require = createRequire(import.meta.url);
  const app = new koishi.Context();
  const plugin = app.plugin.bind(app) as (plugin: Plugin<Context>, config?: unknown) => ForkScope;
  const sqlite = plugin(require("@minatojs/driver-sqlite").default as Plugin<Context>, { path: join(dir, "bare.db") });
  const table = app.plugin({ name: "bare-table", inject: ["database"], apply: declareEventTable });
  await app.start();
  const database = app.database;
  holdDatabaseFiles(database.drivers);
  const disk = new DiskSync(database.drivers);
  const server = createServer(async (request, response) => {
    const event = EventBody.parse(JSON.parse(await readAll(request)));
    await database.create(EVENT_TABLE, newEventRow(event, bodyHash(event), 0, new Date().toISOString()));
    await disk.flush();
    response.writeHead(202, { "content-type": "application/json" });
    response.end(JSON.stringify({ event_id: event.event_id, state: "queued", duplicate: false }));
  });
  const port = await freePort();
  await new Promise<void>((resolve) => server.listen(port, "127.0.0.1", resolve));
  return {
    origin: `http://127.0.0.1:${port}`,
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
      await disk.close();
      table.dispose();
      sqlite.dispose();
      await app.stop();
    },
  };
}

interface Round {
  perSecond: number;
  p50: number;
  p99: number;
  /** CPU of this whole process per event, in ms. */
  cpuMs: number;
}

async function measure(target: Target): Promise<Round> {
  const pool = new Pool(target.origin, { connections: CONCURRENCY, keepAliveTimeout: 30_000 });
  const latencies: number[] = [];
  let next = 0;
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  await Promise.all(
    Array.from({ length: CONCURRENCY }, async () => {
      while (next < EVENTS) {
        next++;
        const body = eventBody();
        const sent = performance.now();
        const response = await pool.request({
          method: "POST",
          path: target.path,
          headers: { authorization: `Bearer ${target.token}`, "content-type": "application/json" },
          body,
        });
        await response.body.text();
        if (response.statusCode !== 202) throw new Error(`${target.name}: ${response.statusCode}`);
        latencies.push(performance.now() - sent);
      }
    }),
  );
  const elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  await pool.close();
  latencies.sort((a, b) => a - b);
  const at = (q: number) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]!;
  return { perSecond: (EVENTS / elapsedMs) * 1000, p50: at(0.5), p99: at(0.99), cpuMs: (cpu.user + cpu.system) / 1000 / EVENTS };
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

async function main() {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-bench-server-"));
  const plugin = await startKoishi({ dataDir: dir, config: { eventsPerMinute: 100_000_000, eventBurst: 1_000_000, personaWaitMs: 1_000_000_000 } });
  holdDatabaseFiles(plugin.app.database.drivers);
  const bare = await startBare(dir);
  const targets: Target[] = [
    { name: "plugin", origin: new URL(plugin.baseUrl).origin, path: `${new URL(plugin.baseUrl).pathname}/events`, token: plugin.token },
    { name: "bare", origin: bare.origin, path: "/events", token: "" },
  ];
  const results: Record<Target["name"], Round[]> = { plugin: [], bare: [] };
  try {
    for (const target of targets) await measure({ ...target }); // warm-up
    for (let round = 0; round < ROUNDS; round++) {
      for (const target of round % 2 === 0 ? targets : [...targets].reverse()) results[target.name].push(await measure(target));
    }
  } finally {
    await bare.stop();
    await plugin.stop();
    await rm(dir, { recursive: true, force: true });
  }
  console.log(`server ingest: ${EVENTS} events × ${ROUNDS} rounds, ${CONCURRENCY} in flight, kept-alive undici, loopback, Node ${process.version}`);
  for (const name of ["plugin", "bare"] as const) {
    const rows = results[name];
    console.log(
      `  ${name.padEnd(6)}  ${median(rows.map((r) => r.perSecond))
        .toFixed(0)
        .padStart(
          6,
        )} events/s   p50 ${median(rows.map((r) => r.p50)).toFixed(2)} ms   p99 ${median(rows.map((r) => r.p99)).toFixed(2)} ms   CPU ${median(rows.map((r) => r.cpuMs)).toFixed(2)} ms/event`,
    );
  }
  const ratio = median(results.plugin.map((r) => r.perSecond)) / median(results.bare.map((r) => r.perSecond));
  console.log(`  plugin/bare throughput ratio: ${ratio.toFixed(2)}`);
}

await main();
