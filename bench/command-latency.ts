/**
 * `npm run bench:commands`: how long an instruction takes from the operator call to the custom
 * message starting in an idle Pi session, with the held claim (long poll) and with plain polling
 * at the idle interval, in the same run; and what each costs in claim requests while idle.
 *
 * Beside the latency, what a run costs in requests: heartbeats and instruction claims per sample
 * (each sample is one run started by the instruction), and per run of BACK_TO_BACK prompts awaited
 * one after the other (queued follow-ups), where the idle settle should save both.
 *
 * Real parts only: the notify-webhook plugin in a Koishi app (loopback, SQLite), the extension as
 * Pi loads it, a real Pi session with the faux model. Each sample waits a random 0–1 s first, so
 * the instruction lands at a random phase of the polling cycle.
 *
 *   npm run bench:commands -- [samples per mode, default 50] [idle window seconds, default 30]
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import type { Server } from "node:http";
import { join } from "node:path";
import { COMMAND_MESSAGE_TYPE } from "../extension/command-channel/instruction-message.ts";
import { dataDirFor } from "../extension/config/config.ts";
import { startKoishi } from "../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../harness/pi.ts";
import { OPERATOR_TOKEN, operatorApi } from "../harness/agent-api.ts";
import { waitUntil } from "../harness/wait.ts";

const samples = Number(process.argv[2] ?? 50);
const idleWindowMs = Number(process.argv[3] ?? 30) * 1000;

const MODES = [
  { name: "long poll (longPollMs 25000)", command: { longPollMs: 25_000 } },
  { name: "plain polling (idlePollIntervalMs 1000)", command: { longPollMs: 0, idlePollIntervalMs: 1_000 } },
] as const;

// Fifty runs a minute is far beyond the per-session heartbeat limit (60/min, burst 20): a 429 there
// would measure its Retry-After, not the channel. Lifted for the measurement, as bench:presence does.
const koishi = await startKoishi({
  config: { operatorToken: OPERATOR_TOKEN, recipientId: "10001", heartbeatsPerMinute: 1_000_000, heartbeatBurst: 1_000_000 },
});
const operator = operatorApi(koishi);
// Claim requests are counted where they arrive: Koishi's own HTTP server.
const http = (koishi.app as unknown as { server: { _http: Server } }).server._http;
let claimRequests = 0;
let instructionClaims = 0;
let heartbeats = 0;
http.on("request", (req) => {
  if (req.method === "GET" && req.url?.includes("/commands?")) {
    claimRequests++;
    if (!req.url.includes("lane=control")) instructionClaims++;
  }
  if (req.method === "POST" && req.url?.endsWith("/sessions/heartbeat")) heartbeats++;
});
const BACK_TO_BACK = 20;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
interface Row {
  mode: string;
  n: number;
  p50: number;
  p99: number;
  max: number;
  perMinute: number;
  /** Heartbeats and instruction claims per sample run, and per back-to-back run. */
  perRun: { heartbeats: number; claims: number };
  perBackToBack: { heartbeats: number; claims: number };
}
const rows: Row[] = [];
const savedEnv = { ...process.env };

try {
  for (const mode of MODES) {
    const root = makeRoot();
    const agentDir = join(root, "agent");
    mkdirSync(dataDirFor(agentDir), { recursive: true });
    // Completion notices are off: this measures the command channel alone.
    writeFileSync(join(dataDirFor(agentDir), "config.json"), JSON.stringify({ command: mode.command, notify: { completed: false, failed: false } }));
    Object.assign(process.env, {
      PI_CODING_AGENT_DIR: agentDir,
      ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
      ANON_NOTIFY_TOKEN: koishi.token,
      ANON_NOTIFY_RECIPIENT_QQ: "10001",
      ANON_NOTIFY_ANON_QQ: "10002",
    });
    const pi = await startPi({ root });
    try {
      await pi.prompt("/anon-notify");
      const sessionId = pi.session.sessionManager.getSessionId();
      await waitUntil(async () => ((await operator.sessions()).body.sessions.length > 0 ? true : undefined), "online");

      const latencies: number[] = [];
      const counted = () => ({ heartbeats, claims: instructionClaims });
      const perRunSince = (from: { heartbeats: number; claims: number }, runs: number) => ({
        heartbeats: (heartbeats - from.heartbeats) / runs,
        claims: (instructionClaims - from.claims) / runs,
      });
      const sampled = counted();
      for (let i = 0; i < samples; i++) {
        await sleep(Math.random() * 1_000);
        pi.script([ai.fauxAssistantMessage("ok")]);
        const arrived = new Promise<number>((resolve) => {
          const off = pi.session.subscribe((event) => {
            if (event.type === "message_start" && event.message.role === "custom" && event.message.customType === COMMAND_MESSAGE_TYPE) {
              off();
              resolve(performance.now());
            }
          });
        });
        const sentAt = performance.now();
        const created = await operator.create({ session_id: sessionId, instruction: `第 ${i + 1} 条` });
        if (created.status !== 201) throw new Error(`create: ${created.status} ${JSON.stringify(created.body)}`);
        latencies.push((await arrived) - sentAt);
        await pi.session.waitForIdle();
      }
      // The last run's idle heartbeat and claim belong to it.
      await sleep(1_000);
      const perRun = perRunSince(sampled, samples);

      // Runs that follow each other at once.
      const burst = counted();
      pi.script(Array.from({ length: BACK_TO_BACK }, (_, i) => ai.fauxAssistantMessage(`第 ${i + 1} 轮`)));
      for (let i = 0; i < BACK_TO_BACK; i++) await pi.prompt(`第 ${i + 1} 轮`);
      await sleep(1_000);
      const perBackToBack = perRunSince(burst, BACK_TO_BACK);

      // Idle cost: claim requests over a quiet window, nothing queued.
      await sleep(2_000);
      const before = claimRequests;
      await sleep(idleWindowMs);
      const perMinute = ((claimRequests - before) * 60_000) / idleWindowMs;

      latencies.sort((a, b) => a - b);
      rows.push({
        mode: mode.name,
        n: latencies.length,
        p50: percentile(latencies, 50),
        p99: percentile(latencies, 99),
        max: latencies.at(-1)!,
        perMinute,
        perRun,
        perBackToBack,
      });
    } finally {
      await pi.dispose({ keepRoot: true });
      rmSync(root, { recursive: true, force: true });
    }
  }
} finally {
  process.env = savedEnv;
  await koishi.stop();
}

console.log(`\nInstruction latency, operator POST → custom message start in an idle Pi session (Node ${process.version}, loopback)`);
console.log("| mode | samples | p50 ms | p99 ms | max ms | idle claim requests / min | heartbeats + claims per run | per back-to-back run |");
console.log("|---|---|---|---|---|---|---|---|");
const requests = (r: Row["perRun"]) => `${r.heartbeats.toFixed(2)} + ${r.claims.toFixed(2)}`;
for (const row of rows) {
  console.log(
    `| ${row.mode} | ${row.n} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.max.toFixed(1)} | ${row.perMinute.toFixed(1)} | ${requests(row.perRun)} | ${requests(row.perBackToBack)} |`,
  );
}
