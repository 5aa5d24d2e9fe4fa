/**
 * `npm run bench:start`: from the owner's `anon.new` in chat to the new session's first model call,
 * against Pi's own start-up: the same `pi --mode rpc` command the host runs, spawned directly and
 * sent the task at once, and plain `pi --mode rpc` without this extension. The differences are the
 * host's and the server's share (claim, spawn, ACK) and the extension's.
 *
 * Real parts: the notify-webhook plugin in a Koishi app (loopback, SQLite, plugin-mock chat),
 * anon-notify-host's CLI on the pinned Node, Pi's CLI, the stub model on loopback, which records
 * when each request arrives. A new host (its own name) per sample, so each start finds an idle host
 * and no Pi of an earlier sample is still running.
 *
 *   npm run bench:start -- [samples per mode, default 20]
 */
import { type ChildProcess, spawn } from "node:child_process";
import { randomUUID } from "node:crypto";
import { chmodSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { LIMITS_FLAG, START_ON_FLAG } from "../activation.ts";
import { startChat } from "../harness/chat.ts";
import { waitUntil } from "../harness/wait.ts";
import { configureExtension } from "../harness/webhook.ts";
import { lastUserText, makePiHome, PI_CLI, PINNED_NODE, REPO, startStubModel } from "../test/helpers/pi-cli.ts";

const samples = Number(process.argv[2] ?? 20);
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

/** When the first request carrying each task arrived, by task. */
const firstCall = new Map<string, (at: number) => void>();
const model = await startStubModel((request) => {
  const task = lastUserText(request);
  firstCall.get(task)?.(performance.now());
  firstCall.delete(task);
});
const calledWith = (task: string) => new Promise<number>((resolve) => firstCall.set(task, resolve));

const server = await startChat({ config: { sessionHeartbeatTimeoutMs: 4_000 } });
const home = makePiHome(model);
// No completion notices: this measures the start alone (and the server has no persona to hand them to).
configureExtension(home.root, `${server.baseUrl}/events`, { notify: { completed: false, failed: false } }, server.token);
const code = join(home.root, "code");
mkdirSync(join(code, "shop"), { recursive: true });
const bin = join(home.root, "bin");
mkdirSync(bin);
// The host's `pi`: Pi's CLI with this extension, noting when the host started it (epoch ms).
const spawnedFile = join(home.root, "spawned");
writeFileSync(join(bin, "pi"), `#!/bin/sh\ndate +%s%3N >> "${spawnedFile}"\nexec "${PINNED_NODE}" "${PI_CLI}" -e "${REPO}" "$@"\n`);
chmodSync(join(bin, "pi"), 0o755);
const env = { ...home.env, PATH: [bin, home.env.PATH].join(delimiter) };

function exited(child: ChildProcess): Promise<void> {
  return child.exitCode !== null || child.signalCode !== null ? Promise.resolve() : new Promise((done) => child.once("close", () => done()));
}

async function startHost(name: string): Promise<ChildProcess> {
  const child = spawn(PINNED_NODE, [join(REPO, "host", "cli.ts"), "--root", code, "--name", name], { env, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  await waitUntil(
    () => log.includes("registered as"),
    () => `host ${name} to register\n${log}`,
    30_000,
  );
  return child;
}

/** One `pi --mode rpc` spawned here and sent the task at once: spawn → the task's first model call. */
async function direct(args: string[], task: string): Promise<number> {
  const called = calledWith(task);
  const startedAt = performance.now();
  const child = spawn(PINNED_NODE, [PI_CLI, ...args, "--mode", "rpc"], { cwd: join(code, "shop"), env, stdio: ["pipe", "ignore", "ignore"] });
  child.stdin!.write(`${JSON.stringify({ id: "task", type: "prompt", message: task })}\n`);
  const at = await called;
  child.kill("SIGTERM");
  await exited(child);
  return at - startedAt;
}

/** Chat command → the host starting `pi`, per chat sample: the host's and the server's own share, without Pi. */
const toSpawn: number[] = [];

const modes: { name: string; sample: (i: number) => Promise<number> }[] = [
  {
    name: "chat `anon.new` → host → Pi with anon-notify (first model call)",
    async sample(i) {
      const name = `bench-${i}-${randomUUID().slice(0, 6)}`;
      const host = await startHost(name);
      const task = `start ${i} ${randomUUID()}`;
      const called = calledWith(task);
      const sentAt = performance.now();
      const sentAtEpoch = Date.now();
      const replied = server.owner().receive(`anon.new #${name} shop ${task}`);
      const at = await called;
      toSpawn.push(Number(readFileSync(spawnedFile, "utf8").trim().split("\n").at(-1)) - sentAtEpoch);
      await replied;
      host.kill("SIGTERM");
      await exited(host);
      return at - sentAt;
    },
  },
  {
    name: "`pi --mode rpc` as the host runs it (anon-notify on), spawned directly",
    sample: (i) => direct(["-e", REPO, "--session-id", randomUUID(), `--${START_ON_FLAG}`, `--${LIMITS_FLAG}={"turns":50}`], `direct ${i} ${randomUUID()}`),
  },
  { name: "`pi --mode rpc` without anon-notify", sample: (i) => direct(["--no-session"], `bare ${i} ${randomUUID()}`) },
];

const latencies = modes.map(() => [] as number[]);
try {
  // The modes take turns, so a busy moment of the machine weighs on each alike.
  for (let i = 0; i < samples; i++) {
    for (const [index, mode] of modes.entries()) {
      model.script({ text: "ok" });
      latencies[index]!.push(await mode.sample(i));
    }
  }
} finally {
  await server.stop();
  await model.close();
  home.dispose();
}

const row = (mode: string, values: number[]) => {
  const sorted = values.sort((a, b) => a - b);
  return { mode, n: sorted.length, p50: percentile(sorted, 50), p99: percentile(sorted, 99), max: sorted.at(-1)! };
};
const rows = modes.map((mode, index) => row(mode.name, latencies[index]!));
console.log(`\nStart latency, to the new session's first model call (Node ${process.version}, loopback, stub model)`);
console.log("| mode | samples | p50 ms | p99 ms | max ms |");
console.log("|---|---|---|---|---|");
for (const row of rows) console.log(`| ${row.mode} | ${row.n} | ${row.p50.toFixed(0)} | ${row.p99.toFixed(0)} | ${row.max.toFixed(0)} |`);
const spawned = row("chat `anon.new` → the host starts `pi` (no Pi time in it)", toSpawn);
console.log(`| ${spawned.mode} | ${spawned.n} | ${spawned.p50.toFixed(0)} | ${spawned.p99.toFixed(0)} | ${spawned.max.toFixed(0)} |`);
const [chat, hosted, bare] = rows;
console.log(
  `host + server + chat overhead at p50: ${(chat!.p50 - hosted!.p50).toFixed(0)} ms; anon-notify's share of Pi's start-up at p50: ${(hosted!.p50 - bare!.p50).toFixed(0)} ms`,
);
