/**
 * `npm run bench:stop`: how long a remote stop takes to abort the run inside a real Pi session, from
 * the operator's request and from the owner's `anon.stop` chat message (both through the same
 * operator service), beside the same abort done locally (Esc: `session.abort()`), in one run.
 *
 * Real parts only: the notify-webhook plugin in a Koishi app (loopback, SQLite) with plugin-mock's
 * owner chat, the extension as Pi loads it, a real Pi session whose faux model streams until Pi
 * aborts it. "Aborted" is the moment the model's abort signal fires.
 *
 *   npm run bench:stop -- [samples per mode, default 50]
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dataDirFor } from "../extension/config/config.ts";
import { extensionEnv } from "../harness/extension-env.ts";
import { startChat } from "../harness/chat.ts";
import { ai, makeRoot, startPi, type ModelStep } from "../harness/pi.ts";
import { operatorApi } from "../harness/agent-api.ts";
import { waitUntil } from "../harness/wait.ts";

const samples = Number(process.argv[2] ?? 50);

const koishi = await startChat();
const operator = operatorApi(koishi);
const root = makeRoot();
const agentDir = join(root, "agent");
mkdirSync(dataDirFor(agentDir), { recursive: true });
// Notices are off: this measures the control lane alone.
writeFileSync(join(dataDirFor(agentDir), "config.json"), JSON.stringify({ notify: { completed: false, failed: false } }));
const savedEnv = { ...process.env };
Object.assign(process.env, extensionEnv(koishi, root));

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** A model reply that streams until Pi aborts it, telling when it started and when the abort arrived. */
function streamingUntilAbort(): { step: ModelStep; started: Promise<void>; aborted: Promise<number> } {
  let started!: () => void;
  let aborted!: (at: number) => void;
  const startedP = new Promise<void>((resolve) => (started = resolve));
  const abortedP = new Promise<number>((resolve) => (aborted = resolve));
  const step: ModelStep = async (_context, options) => {
    started();
    await new Promise<void>((resolve) => {
      const signal = options?.signal;
      if (!signal) return resolve();
      signal.addEventListener(
        "abort",
        () => {
          aborted(performance.now());
          resolve();
        },
        { once: true },
      );
    });
    return ai.fauxAssistantMessage("", { stopReason: "aborted", errorMessage: "Request was aborted" });
  };
  return { step, started: startedP, aborted: abortedP };
}

const rows: { mode: string; n: number; p50: number; p99: number; max: number }[] = [];
const pi = await startPi({ root });
try {
  await pi.prompt("/anon-notify");
  const sessionId = pi.session.sessionManager.getSessionId();
  await waitUntil(async () => ((await operator.sessions()).body.sessions.length > 0 ? true : undefined), "online");

  const modes: { name: string; stop: () => Promise<unknown> }[] = [
    { name: "local Esc (session.abort())", stop: () => pi.session.abort() },
    {
      name: "remote stop (POST /operator/sessions/{id}/stop)",
      stop: async () => {
        const answer = await operator.stop(sessionId);
        if (answer.status !== 202) throw new Error(`stop: ${answer.status} ${JSON.stringify(answer.body)}`);
        const id = answer.body.command.command_id as string;
        // The control lane takes the next stop only after this one's ACK, as in real use.
        await waitUntil(
          async () =>
            (await operator.list(sessionId)).body.commands.find((c: { command_id: string }) => c.command_id === id)?.state === "accepted" ? true : undefined,
          "stop ACKed",
        );
      },
    },
    {
      name: "chat `anon.stop #1` (plugin-mock, owner's private chat)",
      // The command replies once the extension has reported the outcome, so the lane is free after it.
      stop: () => koishi.owner().receive("anon.stop #1"),
    },
  ];
  for (const mode of modes) {
    const latencies: number[] = [];
    for (let i = 0; i < samples; i++) {
      const run = streamingUntilAbort();
      pi.script([run.step]);
      const prompt = pi.prompt(`第 ${i + 1} 次`);
      await run.started;
      // A random moment into the run, so the stop lands at any phase of the session's polling.
      await sleep(Math.random() * 200);
      const sentAt = performance.now();
      const stopping = mode.stop();
      latencies.push((await run.aborted) - sentAt);
      await stopping;
      await prompt;
      await pi.session.waitForIdle();
    }
    latencies.sort((a, b) => a - b);
    rows.push({ mode: mode.name, n: latencies.length, p50: percentile(latencies, 50), p99: percentile(latencies, 99), max: latencies.at(-1)! });
  }
} finally {
  await pi.dispose({ keepRoot: true });
  await koishi.stop();
  process.env = savedEnv;
  rmSync(root, { recursive: true, force: true });
}

console.log(`\nStop latency, request → the run's abort signal in a streaming Pi session (Node ${process.version}, loopback)`);
console.log("| mode | samples | p50 ms | p99 ms | max ms |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(`| ${row.mode} | ${row.n} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.max.toFixed(1)} |`);
const [local, ...remotes] = rows;
for (const remote of remotes) console.log(`${remote.mode} / local at p50: ${(remote.p50 / Math.max(local!.p50, 0.001)).toFixed(0)}×`);
