/**
 * `npm run bench:presence`: what holding many online sessions costs the notify-webhook server.
 * The real plugin (Koishi, plugin-server, SQLite) runs in a child process; this process plays
 * SESSIONS Pi runtimes, each heartbeating every INTERVAL_MS with its phase spread evenly, over a
 * kept-alive undici pool on loopback. Reported: the server's CPU share of one core and its memory,
 * idle and then under the load, heartbeat latency p50/p99, errors, and what one
 * `GET /operator/sessions` over all of them costs. Bounded: every phase has a fixed duration.
 *
 * The same load is sent, in the same run, five ways: to the plugin over HTTP, to the plugin over
 * the presence stream (one kept WebSocket per runtime, `GET /sessions/stream`: 5,000 sockets, so
 * its RSS says what they cost) with every beat answered and with periodic beats quiet (answered
 * only if refused, docs/protocol.md "Quiet frames", as the extension sends them), and to a bare server in its own child, over HTTP (`node:http`) and
 * over a bare `ws` WebSocket (as plugin-server mounts it): the same token check, schema and
 * answer, sessions kept in a Map. The bare server's CPU is the floor each way pays on this machine,
 * so the plugin's shares are read against it.
 *
 * Those five send one beat per session per INTERVAL_MS. A sixth line sends what the extension now
 * sends over the stream (docs/protocol.md, "Cadence"): after each session's first answered frame its
 * timer beats every `beatIntervalMs` (half the server's TTL, 15 s with the defaults), quiet or
 * answered by the extension's own `sendQuiet` rule. That rule is run on each beat's scheduled time,
 * taking the answer as arriving when the beat was sent: the extension re-arms its timer when that
 * answer comes, so the beat one TTL later is never before it and is answered, the costlier case.
 */
import { fork } from "node:child_process";
import { createHash, timingSafeEqual } from "node:crypto";
import { once } from "node:events";
import { createServer } from "node:http";
import { loadavg } from "node:os";
import { performance } from "node:perf_hooks";
import { Agent, request } from "undici";
import { WebSocketServer } from "ws";
import { beatIntervalMs, CLOSED_STREAM, type StreamLink, sendQuiet, streamChanged } from "../extension/presence/decisions.ts";
import { operatorApi } from "../harness/agent-api.ts";
import { openStream, type TestStream } from "../harness/presence-stream.ts";
import { Heartbeat } from "../protocol/sessions.ts";
import { API_BASE_PATH, PROTOCOL_VERSIONS } from "../protocol/wire.ts";

const SESSIONS = Number(process.env.BENCH_SESSIONS ?? 5000);
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
      presenceStreamsTotal: 1_000_000,
    },
  });
  answerParent(harness.baseUrl, harness.token, () => harness.stop());
}

/**
 * The floor: a plain heartbeat handler with the same checks and answer, and no Koishi, over
 * node:http and over a bare `ws` server on the same port (each WebSocket is one stream).
 */
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
  new WebSocketServer({ server }).on("connection", (socket, request) => {
    if (!authorized(request.headers.authorization)) return socket.close(4401, "unauthorized");
    socket.on("message", (data) => socket.send(answer(String(data))));
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
  /** Frames sent quiet, of `sent`. */
  quiet: number;
  /** Each session's timer interval in the measured window. */
  intervalMs: number;
  errors: number;
  p50: number;
  p99: number;
}

/**
 * Idle, then one interval to register every session, then the measured window; `after` runs before
 * the server stops. `stream`: each session beats over its own presence stream, opened at its first beat.
 */
async function load(
  mode: "--serve" | "--serve-bare",
  way: "http" | "stream" | "quiet" | "cadence",
  after?: (baseUrl: string, token: string, dispatcher: Agent) => Promise<void>,
): Promise<LoadResult> {
  const server = startServer(mode);
  const { baseUrl, token } = await server.ready();
  const dispatcher = new Agent({ connections: CONNECTIONS, keepAliveTimeout: 60_000 });
  const latencies: number[] = [];
  let errors = 0;
  const streams = new Map<number, TestStream>();
  /**
   * `quiet` and `cadence`: each session's stream as the extension's own decisions see it, which send a
   * beat quiet within one TTL of the last answer; `cadence` reads them on the beats' scheduled times.
   */
  const links = new Map<number, StreamLink>();
  const openLink: StreamLink = { ...CLOSED_STREAM, offered: true, state: "open" };
  let quietSent = 0;

  /** `scheduledMs`: when this beat was due (performance.now() time). */
  const beat = async (index: number, scheduledMs: number) => {
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
    if (way !== "http") {
      let stream = streams.get(index);
      if (!stream) {
        stream = openStream({ baseUrl, token });
        streams.set(index, stream);
        links.set(index, openLink);
      }
      try {
        await stream.opened;
        // A session's state never changes here, so what decides is the extension's rule: within one TTL of the last answer.
        const link = links.get(index) ?? openLink;
        const at = () => (way === "cadence" ? scheduledMs : performance.now());
        if ((way === "quiet" || way === "cadence") && sendQuiet(link, body, at())) {
          quietSent++;
          return await stream.post({ ...body, quiet: true });
        }
        const started = performance.now();
        const answer = await stream.send(body);
        latencies.push(performance.now() - started);
        if ("error" in answer) errors++;
        else {
          const quietBeats = answer.quiet_beats === true;
          links.set(index, streamChanged(link, { kind: "answered", beat: body, quietBeats, ttlMs: answer.ttl_ms, nowMs: at() }));
        }
      } catch {
        errors++;
        streams.delete(index);
      }
      return;
    }
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

  const quietRefusals = () => {
    let refused = 0;
    for (const stream of streams.values()) refused += stream.answers.filter((answer) => (answer as { quiet?: boolean }).quiet === true).length;
    return refused;
  };

  /** Every session beats once per `intervalMs`, at its own evenly spread phase, until `ms` have passed. */
  const run = async (ms: number, intervalMs = INTERVAL_MS) => {
    const start = performance.now();
    const tickMs = 10;
    const perTick = (SESSIONS * tickMs) / intervalMs;
    const inFlight = new Set<Promise<void>>();
    let sent = 0;
    for (let tick = 0; performance.now() - start < ms; tick++) {
      const due = Math.floor((tick + 1) * perTick);
      for (; sent < due; sent++) {
        const pending = beat(sent % SESSIONS, start + (sent * intervalMs) / SESSIONS);
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
    // `cadence`: the extension's timer after its stream's first answer, read from one (one server, one TTL for all).
    if (way === "cadence") await beat(0, performance.now());
    const intervalMs = way === "cadence" ? beatIntervalMs(links.get(0) ?? CLOSED_STREAM, INTERVAL_MS) : INTERVAL_MS;
    await run(intervalMs, intervalMs);
    latencies.length = 0;
    errors = 0;
    quietSent = 0;
    const refusedBefore = quietRefusals();
    const loadStart = await server.stats();
    const sent = await run(LOAD_MS, intervalMs);
    const loadEnd = await server.stats();
    // A quiet beat's refusal comes as a frame marked quiet, whenever it comes: count it as an error.
    errors += quietRefusals() - refusedBefore;
    const sorted = [...latencies].sort((a, b) => a - b);
    await after?.(baseUrl, token, dispatcher);
    return {
      idle: cpuShare(idleStart, idleEnd),
      idleMemory: idleEnd.memory,
      cpu: cpuShare(loadStart, loadEnd),
      systemCpu: cpuShare(loadStart, loadEnd, "system"),
      memory: loadEnd.memory,
      sent,
      quiet: quietSent,
      intervalMs,
      errors,
      p50: percentile(sorted, 50),
      p99: percentile(sorted, 99),
    };
  } finally {
    for (const stream of streams.values()) stream.socket.close();
    await dispatcher.close();
    await server.stop();
  }
}

async function main(): Promise<void> {
  let listed = 0;
  let listMs = 0;
  const plugin = await load("--serve", "http", async (baseUrl, token, dispatcher) => {
    const listStarted = performance.now();
    const list = await operatorApi({ baseUrl, token, dispatcher }, OPERATOR_TOKEN).sessions();
    listed = (list.body as { sessions: unknown[] }).sessions.length;
    listMs = performance.now() - listStarted;
  });
  const stream = await load("--serve", "stream");
  const quiet = await load("--serve", "quiet");
  const bare = await load("--serve-bare", "http");
  const bareStream = await load("--serve-bare", "stream");
  const cadence = await load("--serve", "cadence");

  console.log(
    `notify-webhook presence: ${SESSIONS} sessions, one heartbeat each per ${INTERVAL_MS / 1000} s (${((SESSIONS * 1000) / INTERVAL_MS).toFixed(0)} req/s), load average ${loadavg()
      .map((value) => value.toFixed(2))
      .join(" ")}`,
  );
  for (const [name, result] of [
    ["plugin over HTTP", plugin],
    ["plugin over the presence stream (one WebSocket per runtime), every beat answered", stream],
    ["plugin over the presence stream, periodic beats quiet (answered once per TTL, as the extension sends them)", quiet],
    ["bare node:http", bare],
    ["bare ws (one WebSocket per runtime)", bareStream],
    [`plugin over the stream, as the extension now sends (timer every ${cadence.intervalMs / 1000} s, quiet by the extension's rule)`, cadence],
  ] as const) {
    console.log(`  ${name}:`);
    const answered = result.quiet > 0 ? `, ${result.sent - result.quiet} answered` : "";
    console.log(`    idle (no sessions, ${IDLE_MS / 1000} s): server CPU ${result.idle.toFixed(2)} % of one core, RSS ${mib(result.idleMemory.rss)} MiB`);
    console.log(
      `    under load (${LOAD_MS / 1000} s, ${result.sent} heartbeats${answered}, ${result.errors} errors): server CPU ${result.cpu.toFixed(1)} % of one core (${result.systemCpu.toFixed(1)} % in the kernel), RSS ${mib(result.memory.rss)} MiB, heap ${mib(result.memory.heapUsed)} MiB`,
    );
    console.log(`    heartbeat latency p50 ${result.p50.toFixed(2)} ms, p99 ${result.p99.toFixed(2)} ms`);
  }
  console.log(
    `  CPU under load: plugin over HTTP / bare ${(plugin.cpu / bare.cpu).toFixed(2)}, stream / bare ${(stream.cpu / bare.cpu).toFixed(2)}, stream / plugin over HTTP ${(stream.cpu / plugin.cpu).toFixed(2)}, stream / bare ws ${(stream.cpu / bareStream.cpu).toFixed(2)}, quiet stream / stream ${(quiet.cpu / stream.cpu).toFixed(2)}, quiet stream / bare ws ${(quiet.cpu / bareStream.cpu).toFixed(2)}, as the extension now sends / quiet stream ${(cadence.cpu / quiet.cpu).toFixed(2)}, / bare ws ${(cadence.cpu / bareStream.cpu).toFixed(2)}`,
  );
  console.log(
    `  CPU per heartbeat: plugin over HTTP ${perBeat(plugin)} µs, stream ${perBeat(stream)} µs, quiet stream ${perBeat(quiet)} µs, bare node:http ${perBeat(bare)} µs, bare ws ${perBeat(bareStream)} µs, as the extension now sends ${perBeat(cadence)} µs`,
  );
  console.log(`  GET /operator/sessions, first page: ${listed} sessions in ${listMs.toFixed(1)} ms`);
  if ([plugin, stream, quiet, bare, bareStream, cadence].some((result) => result.errors > 0)) process.exitCode = 1;
}

if (process.argv.includes("--serve")) await serve();
else if (process.argv.includes("--serve-bare")) await serveBare();
else await main();
