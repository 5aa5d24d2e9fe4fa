/**
 * `npm run bench:presence`: what holding many online sessions costs the notify-webhook server.
 * The real plugin (Koishi, plugin-server, SQLite) runs in a child process; this process plays
 * SESSIONS Pi runtimes, each heartbeating over HTTP every INTERVAL_MS with its phase spread evenly,
 * over a kept-alive undici pool on loopback. Reported: the server's CPU share of one core (target
 * < 2 % at 500 sessions) and its memory, idle and under the load, heartbeat latency p50/p99,
 * errors, and what one `GET /operator/sessions` over all of them costs. The same load goes to a bare
 * `node:http` server in its own child (same token check, schema and answer, sessions in a Map): the
 * floor this machine pays per request. Bounded: every phase has a fixed duration.
 */
import { fork } from "node:child_process";
import { createHash, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { Agent, request } from "undici";
import { operatorApi } from "../harness/agent-api.ts";
import { Heartbeat } from "../protocol/sessions.ts";
import { API_BASE_PATH, PROTOCOL_VERSIONS } from "../protocol/wire.ts";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 500);
const TARGET_CPU = 2;
const INTERVAL_MS = Number(process.env.BENCH_INTERVAL_MS ?? 10_000);
const IDLE_MS = Number(process.env.BENCH_IDLE_MS ?? 10_000);
const LOAD_MS = Number(process.env.BENCH_LOAD_MS ?? 30_000);
const CONNECTIONS = 32;
const OPERATOR_TOKEN = "bench-operator-token-with-at-least-32-characters";

interface ServerStats {
  cpu: NodeJS.CpuUsage;
  memory: NodeJS.MemoryUsage;
  uptimeMs: number;
}

type ServerMessage = { kind: "ready"; baseUrl: string; token: string } | ({ kind: "stats" } & ServerStats);

async function serve(): Promise<void> {
  const { startKoishi } = await import("../harness/koishi.ts");
  // Thousands of sessions are far beyond the default heartbeat limit (sized for ~100 sessions): lift it for the measurement.
  const harness = await startKoishi({
    config: {
      operatorToken: OPERATOR_TOKEN,
      heartbeatsPerMinute: 1_000_000_000,
      heartbeatBurst: 1_000_000_000,
      heartbeatsTotalPerMinute: 1_000_000_000,
      heartbeatTotalBurst: 1_000_000_000,
    },
  });
  answerParent(harness.baseUrl, harness.token, () => harness.stop());
}

/** The floor: a plain heartbeat handler with the same checks and answer, and no Koishi. */
async function serveBare(): Promise<void> {
  const token = "bench-bare-token";
  const expected = createHash("sha256").update(token).digest();
  const sessions = new Map<string, Heartbeat>();
  const authorized = (header: string | undefined) =>
    timingSafeEqual(
      createHash("sha256")
        .update(/^Bearer\s+(\S+)\s*$/i.exec(header ?? "")?.[1] ?? "")
        .digest(),
      expected,
    );
  const answer = (body: string) => {
    const heartbeat = Heartbeat.parse(JSON.parse(body));
    sessions.set(heartbeat.session_id, heartbeat);
    return JSON.stringify({ ttl_ms: 30_000, server_time: new Date().toISOString(), command_protocol: PROTOCOL_VERSIONS.commands });
  };
  const server = createServer(async (request, response) => {
    const chunks: Buffer[] = [];
    for await (const chunk of request as AsyncIterable<Buffer>) chunks.push(chunk);
    if (request.url !== `${API_BASE_PATH}/sessions/heartbeat` || !authorized(request.headers.authorization)) {
      response.writeHead(401).end();
      return;
    }
    const body = answer(Buffer.concat(chunks).toString("utf8"));
    response.writeHead(200, { "content-type": "application/json" });
    response.end(body);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as { port: number };
  answerParent(`http://127.0.0.1:${port}${API_BASE_PATH}`, token, () => new Promise((resolve) => server.close(() => resolve())));
}

function answerParent(baseUrl: string, token: string, stop: () => Promise<void>): void {
  process.send!({ kind: "ready", baseUrl, token } satisfies ServerMessage);
  process.on("message", async (message: string) => {
    if (message === "stats") {
      process.send!({ kind: "stats", cpu: process.cpuUsage(), memory: process.memoryUsage(), uptimeMs: performance.now() } satisfies ServerMessage);
    } else if (message === "stop") {
      await stop();
      process.exit(0);
    }
  });
}

function startServer(mode: "--serve" | "--serve-bare") {
  const child = fork(new URL(import.meta.url).pathname, [mode], { stdio: ["ignore", "ignore", "inherit", "ipc"] });
  const next = async <K extends ServerMessage["kind"]>(kind: K): Promise<Extract<ServerMessage, { kind: K }>> => {
    // Each wait ends with a message or with the server's exit, so a crashed server cannot hang the bench.
    const exited = once(child, "exit").then(([code]) => Promise.reject(new Error(`the bench server exited (${code}) before answering ${kind}`)));
    exited.catch(() => {}); // a normal exit after the answer is nobody's error
    for (;;) {
      const [message] = (await Promise.race([once(child, "message"), exited])) as [ServerMessage];
      if (message.kind === kind) return message as Extract<ServerMessage, { kind: K }>;
    }
  };
  return {
    ready: () => next("ready"),
    async stats(): Promise<ServerStats> {
      const answer = next("stats");
      child.send("stats");
      return answer;
    },
    async stop(): Promise<void> {
      const exited = once(child, "exit");
      child.send("stop");
      await exited;
    },
  };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN;
}

/** CPU share of one core between two samples, in percent: user + system, or one of them. */
function cpuShare(before: ServerStats, after: ServerStats, part?: "user" | "system"): number {
  const used = (stats: ServerStats) => (part ? stats.cpu[part] : stats.cpu.user + stats.cpu.system);
  return ((used(after) - used(before)) / 1000 / (after.uptimeMs - before.uptimeMs)) * 100;
}

const mib = (bytes: number) => (bytes / 1024 / 1024).toFixed(1);

/** Server CPU per heartbeat in µs: the share of a core over the heartbeats sent per second. */
const perBeat = (result: { cpu: number; sent: number }) => ((result.cpu / 100) * (LOAD_MS / result.sent) * 1000).toFixed(0);

interface LoadResult {
  idle: number;
  idleMemory: NodeJS.MemoryUsage;
  cpu: number;
  /** The kernel's part of `cpu` (socket reads and writes, mostly). */
  systemCpu: number;
  memory: NodeJS.MemoryUsage;
  sent: number;
  errors: number;
  p50: number;
  p99: number;
}

/** Idle, then one interval to register every session, then the measured window; `after` runs before the server stops. */
async function load(mode: "--serve" | "--serve-bare", after?: (baseUrl: string, token: string, dispatcher: Agent) => Promise<void>): Promise<LoadResult> {
  const server = startServer(mode);
  const { baseUrl, token } = await server.ready();
  const dispatcher = new Agent({ connections: CONNECTIONS, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  let errors = 0;

  const beat = async (index: number) => {
    const body: Heartbeat = {
      session_id: `bench-session-${index}`,
      runtime_id: `bench-runtime-${index}`,
      project: `project-${index % 50}`,
      model: "faux/model",
      state: index % 3 === 0 ? "running" : "idle",
      supports_images: true,
      command_protocol: 2,
      last_activity_at: new Date().toISOString(),
    };
    const started = performance.now();
    try {
      const answer = await request(`${baseUrl}/sessions/heartbeat`, {
        method: "POST",
        dispatcher,
        headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
        body: JSON.stringify(body),
      });
      await answer.body.dump();
      if (answer.statusCode !== 200) errors++;
    } catch {
      errors++;
    }
    latencies.push(performance.now() - started);
  };

  /** Every session beats once per INTERVAL_MS, at its own evenly spread phase, until `ms` have passed. */
  const run = async (ms: number) => {
    const start = performance.now();
    const tickMs = 10;
    const perTick = (SESSIONS * tickMs) / INTERVAL_MS;
    const inFlight = new Set<Promise<void>>();
    let sent = 0;
    for (let tick = 0; performance.now() - start < ms; tick++) {
      const due = Math.floor((tick + 1) * perTick);
      for (; sent < due; sent++) {
        const pending = beat(sent % SESSIONS);
        inFlight.add(pending);
        void pending.then(() => inFlight.delete(pending));
      }
      const wait = start + (tick + 1) * tickMs - performance.now();
      if (wait > 0) await new Promise((resolve) => setTimeout(resolve, wait));
    }
    await Promise.all(inFlight);
    return sent;
  };

  try {
    const idleStart = await server.stats();
    await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
    const idleEnd = await server.stats();

    // One full interval registers every session, then the measured window holds them all online.
    await run(INTERVAL_MS);
    latencies.length = 0;
    errors = 0;
    const loadStart = await server.stats();
    const sent = await run(LOAD_MS);
    const loadEnd = await server.stats();
    const sorted = [...latencies].sort((a, b) => a - b);
    await after?.(baseUrl, token, dispatcher);
    return {
      idle: cpuShare(idleStart, idleEnd),
      idleMemory: idleEnd.memory,
      cpu: cpuShare(loadStart, loadEnd),
      systemCpu: cpuShare(loadStart, loadEnd, "system"),
      memory: loadEnd.memory,
      sent,
      errors,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
    };
  } finally {
    await dispatcher.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  let listed = 0;
  let listMs = 0;
  const plugin = await load("--serve", async (baseUrl, token, dispatcher) => {
    const listStarted = performance.now();
    const list = await operatorApi({ baseUrl, token, dispatcher }, OPERATOR_TOKEN).sessions();
    listed = (list.body as { sessions: unknown[] }).sessions.length;
    listMs = performance.now() - listStarted;
  });
  const bare = await load("--serve-bare");

  console.log(
    `notify-webhook presence: ${SESSIONS} sessions, one HTTP heartbeat each per ${INTERVAL_MS / 1000} s (${((SESSIONS * 1000) / INTERVAL_MS).toFixed(0)} req/s), load average ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
  for (const [name, result] of [
    ["plugin over HTTP", plugin],
    ["bare node:http", bare],
  ] as const) {
    console.log(`  ${name}:`);
    console.log(`    idle (no sessions, ${IDLE_MS / 1000} s): server CPU ${result.idle.toFixed(2)} % of one core, RSS ${mib(result.idleMemory.rss)} MiB`);
    console.log(
      `    under load (${LOAD_MS / 1000} s, ${result.sent} heartbeats, ${result.errors} errors): server CPU ${result.cpu.toFixed(1)} % of one core (${result.systemCpu.toFixed(1)} % in the kernel), RSS ${mib(result.memory.rss)} MiB, heap ${mib(result.memory.heapUsed)} MiB`,
    );
    console.log(`    heartbeat latency p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms`);
  }
  const met = plugin.cpu < TARGET_CPU;
  console.log(
    `  plugin CPU under load ${plugin.cpu.toFixed(2)} % of one core (target < ${TARGET_CPU} %: ${met ? "ok" : "MISSED"}); plugin / bare ${(plugin.cpu / bare.cpu).toFixed(2)}; CPU per heartbeat: plugin ${perBeat(plugin)} µs, bare ${perBeat(bare)} µs`,
  );
  console.log(`  GET /operator/sessions, first page: ${listed} sessions in ${listMs.toFixed(1)} ms`);
  if (!met || plugin.errors > 0 || bare.errors > 0) process.exitCode = 1;
}

if (process.argv.includes("--serve")) await serve();
else if (process.argv.includes("--serve-bare")) await serveBare();
else await main();
