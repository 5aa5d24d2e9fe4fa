/**
 * From a signed GitHub delivery to the model's first call, p50/p99: for a new PR (the answer, the
 * start job, the host, Pi's start-up) and for a PR whose session is online (the instruction path);
 * their difference is the start's cost; beside them Pi's own start-up (spawned as the host spawns it,
 * no server path), so the host's overhead reads apart from it. Real parts: Koishi on loopback with
 * SQLite, the host process, the pinned `pi` CLI and the stub model (test/helpers/host.ts).
 *
 *   node bench/trigger-latency.ts [new-PR samples, default 5] [online-PR samples, default 20]
 */
import { createHmac, randomUUID } from "node:crypto";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { fetch } from "undici";
import { operatorApi } from "../harness/agent-api.ts";
import { waitUntil } from "../harness/wait.ts";
import { findProgram, startSession } from "../host/pi-process.ts";
import { setUp, startHost } from "../test/helpers/host.ts";

const starts = Number(process.argv[2] ?? 5);
const continues = Number(process.argv[3] ?? 20);
const SECRET = "bench-webhook-secret-0123456789";
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
const opened = JSON.parse(readFileSync(join(import.meta.dirname, "../test/fixtures/github/pull_request.opened.json"), "utf8"));

const cleanups: (() => unknown)[] = [];
const t = { after: (fn: () => unknown) => void cleanups.push(fn) };
const trigger = { name: "github", secret: SECRET, projects: [{ repository: "octo-org/shop", project: "shop" }], actors: ["*"] };
const { server, model, code, env } = await setUp(t, { triggers: [{ ...trigger, runsPerDay: 100_000, runsPerKeyPerHour: 100_000 }] });
await startHost(t, env, ["--root", code, "--name", "bench", "--max-sessions", String(starts + 1)]);

// The stub records each request; the time it arrived is noted beside it.
const arrivals: number[] = [];
const push = model.requests.push.bind(model.requests);
model.requests.push = (...items) => {
  for (const _ of items) arrivals.push(performance.now());
  return push(...items);
};

async function deliver(number: number, action: string): Promise<number> {
  const payload = { ...opened, action, number, pull_request: { ...opened.pull_request, number } };
  const raw = Buffer.from(JSON.stringify(payload));
  const before = arrivals.length;
  model.script({ text: "looked" });
  const sentAt = performance.now();
  const answer = await fetch(`${server.baseUrl}/triggers/github`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-github-event": "pull_request",
      "x-github-delivery": randomUUID(),
      "x-hub-signature-256": `sha256=${createHmac("sha256", SECRET).update(raw).digest("hex")}`,
    },
    body: raw,
  });
  if (answer.status !== 202) throw new Error(`delivery answered ${answer.status}: ${await answer.text()}`);
  await waitUntil(() => arrivals.length > before, `the model call for PR ${number}`, 120_000);
  const at = arrivals[before]! - sentAt;
  // The run finishes (every session says idle) before the next sample, so no instruction waits for a turn end.
  await waitUntil(
    async () => {
      const { sessions } = (await operatorApi(server).sessions()).body as { sessions: { state: string }[] };
      return sessions.length > 0 && sessions.every((s) => s.state === "idle");
    },
    "every session idle",
    60_000,
  );
  return at;
}

const report = (label: string, samples: number[]) => {
  const sorted = [...samples].sort((a, b) => a - b);
  console.log(
    `${label.padEnd(44)} n=${String(sorted.length).padStart(3)}  p50 ${percentile(sorted, 50).toFixed(0).padStart(6)} ms  p99 ${percentile(sorted, 99).toFixed(0).padStart(6)} ms`,
  );
};

/** Pi alone: spawned in the project as the host spawns it, to its first model call. */
async function piAlone(): Promise<number> {
  const before = arrivals.length;
  model.script({ text: "looked" });
  const spawnedAt = performance.now();
  const session = await startSession({ program: findProgram("pi", env)!, args: [] }, join(code, "shop"), { session_id: randomUUID(), task: "look" }, env);
  await waitUntil(() => arrivals.length > before, "Pi's first model call", 120_000);
  session.child.kill("SIGTERM");
  await session.exited;
  return arrivals[before]! - spawnedAt;
}

try {
  // Side by side, one of each in turn, so the machine's load changes both alike.
  const alone: number[] = [];
  const started: number[] = [];
  for (let i = 0; i < starts; i++) {
    alone.push(await piAlone());
    started.push(await deliver(1000 + i, "opened"));
  }
  const continued: number[] = [];
  for (let i = 0; i < continues; i++) continued.push(await deliver(1000, "synchronize"));
  report("Pi alone: spawn -> first model call", alone);
  report("new PR: delivery -> start -> first model call", started);
  report("online PR: delivery -> instruction -> call", continued);
} finally {
  for (const cleanup of cleanups.reverse()) await cleanup();
}
