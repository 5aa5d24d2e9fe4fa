/**
 * `npm run bench:sink`: what the local desktop sink costs a real Pi session (SDK + faux model) with
 * this extension loaded from the package root, configured through ANON_NOTIFY_SINK_*. The same
 * scripted session — PROMPTS prompts, each one tool call and one reply, so every event type fires —
 * runs with the channel off ("absent") and on against a black-holed app (accepts, never answers),
 * an absent app (no socket) and a responsive app, interleaved over ROUNDS repetitions; Pi without
 * the extension runs too, for scale. Reports the median wall time (and CPU time) of the prompts and
 * the ratio to "absent" — the target, ≤ 1.05, is for the black-holed app — plus how long quitting
 * takes (bounded by the drain budget).
 * The app runs in its own process, as a real desktop app does. BENCH_MODEL_MS adds provider latency
 * per model call; BENCH_PROMPTS and BENCH_ROUNDS size the run.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ensureSinkToken } from "../extension/sink/token.ts";
import { ai, echoTool, makeRoot, startPi } from "../harness/pi.ts";

const PROMPTS = Number(process.env.BENCH_PROMPTS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TARGET_RATIO = 1.05;
/** Provider latency per model call; 0 is the pure-CPU worst case, a real model takes seconds. */
const MODEL_MS = Number(process.env.BENCH_MODEL_MS ?? 0);
const reply = (message: ReturnType<typeof ai.fauxAssistantMessage>) =>
  MODEL_MS > 0 ? async () => (await new Promise((resolve) => setTimeout(resolve, MODEL_MS)), message) : message;

type Variant = "no extension" | "absent" | "black-holed" | "app absent" | "responsive";
const VARIANTS: Variant[] = ["no extension", "absent", "black-holed", "app absent", "responsive"];
const CHANNEL_ON: Variant[] = ["black-holed", "app absent", "responsive"];

/** The stand-in app in a child process: the sink's own listener, answering at once or never. */
async function startApp(socket: string, token: string, blackHoled: boolean) {
  const listenerModule = new URL("../harness/sink-listener.ts", import.meta.url).href;
  const source = `
    import { startSinkListener } from ${JSON.stringify(listenerModule)};
    const app = await startSinkListener({ socket: process.env.SOCKET, token: process.env.TOKEN, answerDelayMs: ${blackHoled ? "Infinity" : "0"} });
    process.stdout.write("ready\\n");
    process.stdin.resume();
    process.stdin.on("end", async () => { await app.close(); process.stdout.write(app.events.length + "\\n"); process.exit(0); });`;
  const child = spawn(process.execPath, ["--input-type=module", "-e", source], {
    env: { ...process.env, SOCKET: socket, TOKEN: token },
    stdio: ["pipe", "pipe", "inherit"],
  });
  let output = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  while (!output.includes("ready")) await once(child.stdout, "data");
  return {
    async stop(): Promise<number> {
      child.stdin.end();
      await once(child, "exit");
      return Number(output.split("\n")[1]);
    },
  };
}

interface Measured {
  runMs: number;
  cpuMs: number;
  quitMs: number;
  received: number;
}

async function session(variant: Variant): Promise<Measured> {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-bench-sink-"));
  const root = makeRoot();
  const socket = join(dir, "notify.sock");
  const tokenFile = join(dir, "notify.token");
  const app = variant === "black-holed" || variant === "responsive" ? await startApp(socket, ensureSinkToken(tokenFile), variant === "black-holed") : undefined;
  const saved = { ...process.env };
  // A private agent folder: no user configuration of this machine leaks into the figures.
  process.env.PI_CODING_AGENT_DIR = join(root, "agent");
  if (CHANNEL_ON.includes(variant)) {
    Object.assign(process.env, { ANON_NOTIFY_SINK_ENABLED: "true", ANON_NOTIFY_SINK_SOCKET: socket, ANON_NOTIFY_SINK_TOKEN_FILE: tokenFile });
  }
  const pi = await startPi({ root, extension: variant !== "no extension", tools: [echoTool("noop")] });
  try {
    const started = performance.now();
    const cpuStarted = process.cpuUsage();
    for (let n = 0; n < PROMPTS; n++) {
      pi.script([reply(ai.fauxAssistantMessage([ai.fauxToolCall("noop", {})], { stopReason: "toolUse" })), reply(ai.fauxAssistantMessage(`reply ${n}`))]);
      await pi.prompt(`task ${n}`);
      // A person never types within the same event-loop turn; without this gap back-to-back prompts
      // are queued input and (by the hold rule) merge into one unit of work.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const runMs = performance.now() - started;
    const cpu = process.cpuUsage(cpuStarted);
    const quitStarted = performance.now();
    await pi.dispose();
    const quitMs = performance.now() - quitStarted;
    return { runMs, cpuMs: (cpu.user + cpu.system) / 1000, quitMs, received: (await app?.stop()) ?? 0 };
  } finally {
    process.env = saved;
    rmSync(root, { recursive: true, force: true });
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

await session("absent"); // warm-up: module loading and JIT are not the sink's cost
const results = new Map<Variant, Measured[]>(VARIANTS.map((v) => [v, []]));
for (let round = 0; round < ROUNDS; round++) {
  // Rotate the order so drift over time does not favour one variant.
  for (let i = 0; i < VARIANTS.length; i++) {
    const variant = VARIANTS[(i + round) % VARIANTS.length]!;
    results.get(variant)!.push(await session(variant));
  }
}

const medianOf = (variant: Variant, key: keyof Measured) => median(results.get(variant)!.map((m) => m[key]));
const baseline = medianOf("absent", "runMs");
const cpuBaseline = medianOf("absent", "cpuMs");
console.log(
  `sink overhead: ${PROMPTS} prompts × (1 tool call + 1 reply), model latency ${MODEL_MS} ms, ${ROUNDS} rounds, medians; ratios to the channel off ("absent")`,
);
for (const variant of VARIANTS) {
  console.log(
    `  ${variant.padEnd(12)} wall ${medianOf(variant, "runMs").toFixed(0).padStart(6)} ms ×${(medianOf(variant, "runMs") / baseline).toFixed(3)}` +
      `  cpu ${medianOf(variant, "cpuMs").toFixed(0).padStart(6)} ms ×${(medianOf(variant, "cpuMs") / cpuBaseline).toFixed(3)}` +
      `  quit ${medianOf(variant, "quitMs").toFixed(0).padStart(4)} ms  events received ${medianOf(variant, "received")}`,
  );
}
// The bound is for a hung app; the responsive app's figure includes the HTTP work itself.
const blackHoled = medianOf("black-holed", "runMs") / baseline;
console.log(`black-holed app: wall ×${blackHoled.toFixed(3)} (target ≤ ${TARGET_RATIO}): ${blackHoled <= TARGET_RATIO ? "PASS" : "FAIL"}`);
process.exitCode = blackHoled <= TARGET_RATIO ? 0 : 1;
