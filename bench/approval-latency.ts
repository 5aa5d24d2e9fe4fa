/**
 * `npm run bench:approvals -- [samples, default 40]`: answer → guarded tool running, answered in the owner's chat
 * (real Koishi, plugin-mock, a real Pi session) and in the terminal (the floor); then the gate's own cost per call.
 */
import { rmSync } from "node:fs";
import { matchCall, type PolicySettings } from "../extension/approvals/policy-rules.ts";
import { loadShell } from "../extension/approvals/shell-rules.ts";
import type { ExtensionUIContext } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { extensionEnv, writeUserConfig } from "../harness/extension-env.ts";
import { startChat } from "../harness/chat.ts";
import { ai, makeRoot, startPi } from "../harness/pi.ts";
import { OPERATOR_TOKEN, call } from "../harness/agent-api.ts";
import { waitUntil } from "../harness/wait.ts";
import { messagesFor } from "../extension/texts/messages.ts";

const samples = Number(process.argv[2] ?? 40);
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

// The limiters would throttle back-to-back samples: this measures latency, not them. No operator-API mode:
// this Pi runs as the bench's own user, so the server refuses decisions through the token it could read.
const koishi = await startChat({ config: { approvalsPerMinute: 100_000, approvalBurst: 1_000, approvalMessagesPerMinute: 100_000 } });
const owner = koishi.owner();
const root = makeRoot();
const savedEnv = { ...process.env };
Object.assign(process.env, extensionEnv(koishi, root));
writeUserConfig(root, { notify: { completed: false, failed: false }, approval: { enabled: true, rules: [{ id: "probe", tool: "probe" }] } });

let probeStarted: (() => void) | undefined;
let dialog: ((yes: boolean) => void) | undefined;
let dialogOpened: (() => void) | undefined;
const ui: Partial<ExtensionUIContext> = {
  confirm: (_title, _message, opts) =>
    new Promise<boolean>((resolve) => {
      dialog = resolve;
      opts?.signal?.addEventListener("abort", () => resolve(false), { once: true });
      dialogOpened?.();
    }),
};
const pi = await startPi({
  root,
  ui,
  tools: [
    {
      name: "probe",
      label: "probe",
      description: "Notes when it runs.",
      parameters: Type.Object({ n: Type.Number() }),
      async execute() {
        probeStarted?.();
        return { content: [{ type: "text", text: "ran" }], details: undefined };
      },
    },
  ],
});
const rows: { mode: string; n: number; p50: number; p99: number; max: number; callP50: number | null }[] = [];
const CHAT = "owner's chat (anon.approve)";

try {
  await pi.prompt("/anon-notify");
  await waitUntil(
    async () => ((await call(koishi, "GET", "/operator/sessions", undefined, OPERATOR_TOKEN)).body.sessions.length > 0 ? true : undefined),
    "online",
  );
  for (const mode of [CHAT, "terminal answer"] as const) {
    const latencies: number[] = [];
    const calls: number[] = [];
    for (let i = 0; i < samples; i++) {
      pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("probe", { n: i })], { stopReason: "toolUse" }), ai.fauxAssistantMessage("ok")]);
      const opened = new Promise<void>((resolve) => (dialogOpened = resolve));
      const ran = new Promise<number>((resolve) => (probeStarted = () => resolve(performance.now())));
      const run = pi.prompt(`第 ${i + 1} 次`);
      await opened;
      // Both modes start from the same point: the request stored on the server and the dialog open.
      const pending = await waitUntil(async () => {
        const open = (await call(koishi, "GET", "/operator/approvals?state=open", undefined, OPERATOR_TOKEN)).body.approvals;
        return open.length === 1 ? open[0] : undefined;
      }, "the approval is pending on the server");
      const answeredAt = performance.now();
      if (mode === "terminal answer") dialog!(true);
      else {
        const [reply] = await owner.receive(`anon.approve ${pending.code}`);
        calls.push(performance.now() - answeredAt);
        if (!reply?.startsWith(`已批准 ${pending.code}`)) throw new Error(`chat: ${reply}`);
      }
      latencies.push((await ran) - answeredAt);
      await run;
      // The resolution closes the approval before the next sample looks for one pending.
      await waitUntil(
        async () => ((await call(koishi, "GET", "/operator/approvals?state=open", undefined, OPERATOR_TOKEN)).body.approvals.length === 0 ? true : undefined),
        "closed",
      );
    }
    latencies.sort((a, b) => a - b);
    calls.sort((a, b) => a - b);
    rows.push({
      mode,
      n: latencies.length,
      p50: percentile(latencies, 50),
      p99: percentile(latencies, 99),
      max: latencies.at(-1)!,
      callP50: calls.length ? percentile(calls, 50) : null,
    });
  }
} finally {
  await pi.dispose({ keepRoot: true });
  process.env = savedEnv;
  await koishi.stop();
  rmSync(root, { recursive: true, force: true });
}

console.log(`\nApproval latency, answer → guarded tool running (Node ${process.version}, loopback, ${samples} samples each)`);
console.log("| answered by | samples | p50 ms | p99 ms | max ms | the chat reply, p50 ms |");
console.log("|---|---|---|---|---|---|");
for (const row of rows)
  console.log(`| ${row.mode} | ${row.n} | ${row.p50.toFixed(1)} | ${row.p99.toFixed(1)} | ${row.max.toFixed(1)} | ${row.callP50?.toFixed(1) ?? "—"} |`);
const [chat, local] = rows;
if (chat && local) console.log(`\np50 ratio chat / terminal: ${(chat.p50 / Math.max(local.p50, 0.001)).toFixed(1)}×`);

// ── The gate's own cost per call ────────────────────────────────────────────

const read = await loadShell();
const gatePlace = { cwd: "/home/u/proj", home: "/home/u", tempDirs: ["/tmp"] };
const gateSettings: PolicySettings = { mode: "strict", allow: [], disabledRules: [], rules: [], grantableRules: [] };
/** µs per call of `work`, the median of 5 rounds after a warm-up. */
function microseconds(work: () => unknown, calls = 2_000): number {
  for (let i = 0; i < calls; i++) work();
  const rounds = Array.from({ length: 5 }, () => {
    const start = performance.now();
    for (let i = 0; i < calls; i++) work();
    return ((performance.now() - start) * 1000) / calls;
  }).sort((a, b) => a - b);
  return rounds[2]!;
}
const gateOf = (command: string) => () =>
  matchCall({ tool: "bash", input: { command } }, gatePlace, gateSettings, read, messagesFor("en-US").approvals.actions);
const rulesOf = (command: string) => () =>
  matchCall({ tool: "bash", input: { command } }, gatePlace, { ...gateSettings, mode: "rules" }, read, messagesFor("en-US").approvals.actions);
/** An everyday 100-command script strict mode reads through (safe programs, pipes, substitutions, redirections). */
const script100 = Array.from(
  { length: 100 },
  (_, i) => ["ls -la src", `rg -n step${i} src | head -5`, `echo "$(git rev-parse HEAD)" > build/rev${i}.txt`, `sed -n '${i + 1}p' README.md`][i % 4],
).join("; ");
const gateRows: [string, number][] = [
  ["gate, `ls -la` (plain words: no parser)", microseconds(gateOf("ls -la"))],
  ["gate, plain `ls` (strict mode; target < 1 000 µs)", microseconds(gateOf("ls"))],
  ["gate, plain `ls` (rules mode)", microseconds(rulesOf("ls"))],
  ["gate, an everyday 100-command script (strict mode; target < 5 000 µs)", microseconds(gateOf(script100), 200)],
  ["gate, the same script (rules mode)", microseconds(rulesOf(script100), 200)],
  ["`ls -la` through the grammar alone", microseconds(() => read("ls -la"))],
  ["gate, `git status && echo $(date) | tee build/log.txt`", microseconds(gateOf("git status && echo $(date) | tee build/log.txt"))],
  ["gate, `bash -c 'find . -name \"*.ts\" -exec grep -l foo {} +'`", microseconds(gateOf(`bash -c 'find . -name "*.ts" -exec grep -l foo {} +'`))],
  [
    "gate, a 2 000-character script of 100 commands",
    microseconds(gateOf(Array.from({ length: 100 }, (_, i) => `echo step${i} >> build/log.txt`).join("; ")), 200),
  ],
];
console.log(`\nThe gate's cost per tool call (policy + reading the command; µs, median of 5 rounds)`);
console.log("| call | µs per call | × plain `ls -la` |");
console.log("|---|---|---|");
for (const [name, us] of gateRows) console.log(`| ${name.replaceAll("|", "\\|")} | ${us.toFixed(1)} | ${(us / gateRows[0]![1]).toFixed(1)}× |`);
