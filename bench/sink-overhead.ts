/**
 * `npm run bench:sink`: what the local desktop sink costs a real Pi session (SDK + faux model).
 * The same scripted session — PROMPTS prompts, each one tool call and one reply, so every event
 * type fires — runs with the sink absent and with it on against a black-holed app (accepts, never
 * answers), an absent app (no socket) and a responsive app, interleaved over ROUNDS repetitions.
 * Reports median wall time of the prompts and the ratio to "absent" (target ≤ 1.05), plus how long
 * quitting takes with the black-holed app (bounded by the drain budget). The app runs in its own
 * process, as a real desktop app does, so its work is not billed to the session's thread.
 */
import { spawn } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Type } from "typebox";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import { DEFAULT_CONFIG } from "../config.ts";
import { installSink, type InstalledSink } from "../sink/index.ts";
import { ensureSinkToken } from "../sink/token.ts";
import { ai, startPi } from "../test/helpers/pi.ts";

const PROMPTS = Number(process.env.BENCH_PROMPTS ?? 200);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
const TARGET_RATIO = 1.05;

type Variant = "absent" | "black-holed" | "app absent" | "responsive";
const VARIANTS: Variant[] = ["absent", "black-holed", "app absent", "responsive"];

const noop: ToolDefinition = {
  name: "noop",
  label: "noop",
  description: "Does nothing.",
  parameters: Type.Object({}),
  async execute() {
    return { content: [{ type: "text", text: "ok" }], details: undefined };
  },
};

/** The stand-in app in a child process: the sink's own listener, answering at once or never. */
async function startApp(socket: string, token: string, blackHoled: boolean) {
  const listenerModule = new URL("../sink/listener.ts", import.meta.url).href;
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

async function session(variant: Variant): Promise<{ runMs: number; quitMs: number; received: number }> {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-bench-sink-"));
  const config = { ...DEFAULT_CONFIG.sink, enabled: true, socket: join(dir, "notify.sock"), tokenFile: join(dir, "notify.token") };
  const app =
    variant === "black-holed" || variant === "responsive"
      ? await startApp(config.socket, ensureSinkToken(config.tokenFile), variant === "black-holed")
      : undefined;
  let sink: InstalledSink | undefined;
  const pi = await startPi({
    extension: false,
    tools: [noop],
    extensions: variant === "absent" ? [] : [(api) => void (sink = installSink(api, config, { debug: () => {} }))],
  });
  let received = 0;
  try {
    const started = performance.now();
    for (let n = 0; n < PROMPTS; n++) {
      pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("noop", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage(`reply ${n}`)]);
      await pi.prompt(`task ${n}`);
      // A person never types within the same event-loop turn; without this gap back-to-back prompts
      // are queued input and (by the hold rule) merge into one unit of work.
      await new Promise((resolve) => setImmediate(resolve));
    }
    const runMs = performance.now() - started;
    const quitStarted = performance.now();
    await sink?.close();
    const quitMs = performance.now() - quitStarted;
    received = (await app?.stop()) ?? 0;
    return { runMs, quitMs, received };
  } finally {
    await pi.dispose();
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;

await session("absent"); // warm-up: module loading and JIT are not the sink's cost
const results = new Map<Variant, { runMs: number[]; quitMs: number[]; received: number[] }>(
  VARIANTS.map((v) => [v, { runMs: [], quitMs: [], received: [] }]),
);
for (let round = 0; round < ROUNDS; round++) {
  // Rotate the order so drift over time does not favour one variant.
  for (let i = 0; i < VARIANTS.length; i++) {
    const variant = VARIANTS[(i + round) % VARIANTS.length]!;
    const { runMs, quitMs, received } = await session(variant);
    const r = results.get(variant)!;
    r.runMs.push(runMs);
    r.quitMs.push(quitMs);
    r.received.push(received);
  }
}

const baseline = median(results.get("absent")!.runMs);
console.log(`sink overhead: ${PROMPTS} prompts × (1 tool call + 1 reply), ${ROUNDS} rounds, median wall time of the prompts`);
let worst = 0;
for (const variant of VARIANTS) {
  const r = results.get(variant)!;
  const ratio = median(r.runMs) / baseline;
  if (variant !== "absent") worst = Math.max(worst, ratio);
  console.log(
    `  ${variant.padEnd(12)} ${median(r.runMs).toFixed(0).padStart(6)} ms  ×${ratio.toFixed(3)}  quit ${median(r.quitMs).toFixed(0)} ms  events received ${median(r.received)}`,
  );
}
console.log(`worst ratio ×${worst.toFixed(3)} (target ≤ ${TARGET_RATIO}): ${worst <= TARGET_RATIO ? "PASS" : "FAIL"}`);
process.exitCode = worst <= TARGET_RATIO ? 0 : 1;
