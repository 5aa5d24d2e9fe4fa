/**
 * `npm run bench:faults`: what each webhook fault (harness/fault-proxy.ts) costs a turn. A REAL Pi
 * session switched on against the real notify-webhook behind the fault proxy runs TURNS prompts
 * with the fault holding, between two healthy runs, over ROUNDS interleaved rounds; the figure is
 * the median ratio of the prompts' wall time under the fault to the healthy runs around it.
 */
import { performance } from "node:perf_hooks";
import { FAULTS, startFaultRig, type Fault, type Mode } from "../harness/fault-proxy.ts";
import { ai, startPi } from "../harness/pi.ts";

const TURNS = Number(process.env.FAULT_TURNS ?? 200);
const ROUNDS = Number(process.env.FAULT_ROUNDS ?? 5);

const rig = await startFaultRig();
try {
  const measure = async (mode: Mode): Promise<number> => {
    await rig.proxy.set("healthy");
    const pi = await startPi({ root: rig.root });
    await pi.prompt("/anon-notify");
    await rig.proxy.set(mode);
    pi.script(Array.from({ length: TURNS }, (_, i) => ai.fauxAssistantMessage(`第 ${i} 轮完成。`)));
    const started = performance.now();
    for (let i = 0; i < TURNS; i++) await pi.prompt(`turn ${i}`);
    const elapsed = performance.now() - started;
    await rig.proxy.set("healthy");
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
  console.log(`anon-notify under webhook faults — ${TURNS} turns, median of ${ROUNDS} interleaved rounds; prompt wall time under fault / healthy`);
  for (const [fault, samples] of perFault) {
    const median = samples.sort((a, b) => a.ratio - b.ratio)[Math.floor(samples.length / 2)]!;
    console.log(
      `  ${fault.padEnd(15)} ratio ${median.ratio.toFixed(3)}  (${(median.faulty / TURNS).toFixed(2)} vs ${(median.healthy / TURNS).toFixed(2)} ms/turn)`,
    );
  }
} finally {
  await rig.close();
}
