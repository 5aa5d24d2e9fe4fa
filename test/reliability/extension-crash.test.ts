/**
 * The real command channel across server crashes: the extension in a REAL Pi session (SDK + faux
 * model), switched on with `/anon-notify`, long-polling the standalone server (a child process)
 * while an operator queues instructions (some with images, request keys retried after a crash) and
 * cancels some; the server is killed with SIGKILL at seeded random moments and restarted on the
 * same data folder. At the end, read from the Pi session file itself:
 *   - every instruction that was not cancelled was delivered into the session exactly once
 *     (the extension's journal-before-ACK, not a model of it);
 *   - no cancelled instruction ever appeared;
 *   - the server holds every delivered one as `accepted` and every cancelled one as `cancelled`.
 *
 * Kill points: 50 with RELIABILITY=long (EXT_CRASH_KILLS overrides), 2 otherwise; EXT_CRASH_SEED replays.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { request } from "undici";
import { RECIPIENT, writeUserConfig } from "../../harness/extension-env.ts";
import { freePort } from "../../harness/koishi.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { commandMessages } from "../../harness/session-commands.ts";
import { imageOf } from "../server/images.ts";
import { LONG, commandsOnDisk, seedFrom, seededRandom } from "./support.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";

const KILLS = Number(process.env.EXT_CRASH_KILLS ?? (LONG ? 50 : 2));
const COMMANDS_PER_ROUND = 3;

test(`the real command channel across ${KILLS} server SIGKILLs: each instruction in the session exactly once, cancelled ones never`, {
  timeout: LONG ? 20 * 60_000 : 120_000,
}, async (t) => {
  const seed = seedFrom("EXT_CRASH_SEED");
  const random = seededRandom(seed);
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-ext-crash-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await writeFile(join(dataDir, "server.json"), JSON.stringify({ notifyWebhook: { commandLeaseMs: 1000, watchdogEnabled: false } }));
  const port = await freePort();
  const servers: Standalone[] = [];
  t.after(() => Promise.all(servers.map((server) => server.kill())));
  const start = async () => {
    const server = await spawnStandalone(dataDir, port);
    servers.push(server);
    return server;
  };
  let live = await start();
  const agentToken = (await readFile(join(dataDir, "token"), "utf8")).trim();
  const operatorToken = (await readFile(join(dataDir, "operator.token"), "utf8")).trim();

  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_ENDPOINT: `${live.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: agentToken,
    ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
    ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
  });
  // Fast heartbeats and short claims, so the client finds the restarted server within a second or two.
  writeUserConfig(root, {
    presence: { heartbeatIntervalMs: 1000 },
    command: { longPollMs: 2000, idlePollIntervalMs: 200 },
    delivery: { timeoutMs: 1000, backoffMs: 50 },
  });
  const pi = await startPi({ root });
  t.after(async () => {
    await pi.dispose({ keepRoot: true });
    process.env = saved;
    rmSync(root, { recursive: true, force: true });
  });
  // Every instruction starts a run: the model answers each with a short reply.
  pi.script(Array.from({ length: 400 }, () => ai.fauxAssistantMessage("收到。")));
  await pi.prompt("/anon-notify");
  const sessionId = pi.session.sessionManager.getSessionId();

  async function operator(method: "GET" | "POST", path: string, body?: unknown) {
    try {
      const response = await request(`${live.baseUrl}${path}`, {
        method,
        headers: { authorization: `Bearer ${operatorToken}`, "content-type": "application/json" },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
      });
      const text = await response.body.text();
      return { status: response.statusCode, body: text ? JSON.parse(text) : null };
    } catch {
      return undefined; // the server died under the request
    }
  }

  interface Wanted {
    key: string;
    images: number;
    commandId?: string;
  }
  const wanted: Wanted[] = [];
  const cancelled = new Set<string>();
  /** Queues every wanted instruction not yet answered; the session is online once the client's heartbeat is in. */
  async function queueOpen() {
    for (const item of wanted.filter((w) => !w.commandId)) {
      const answer = await operator("POST", "/operator/commands", {
        session_id: sessionId,
        instruction: `第 ${item.key} 条指令`,
        request_key: item.key,
        ...(item.images ? { images: [imageOf("image/png", item.images)] } : {}),
      });
      if (answer && (answer.status === 200 || answer.status === 201)) item.commandId = answer.body.command.command_id;
      else if (answer && !(answer.status === 409 && answer.body.error === "session_offline") && answer.status !== 503) {
        throw new Error(`create answered ${answer.status} ${JSON.stringify(answer.body)} (seed ${seed})`);
      }
    }
  }

  for (let kill = 0; kill < KILLS; kill++) {
    for (let i = 0; i < COMMANDS_PER_ROUND; i++) wanted.push({ key: `r${kill}-${i}`, images: random() < 0.3 ? 64 : 0 });
    await queueOpen();
    const candidate = wanted.filter((w) => w.commandId && !cancelled.has(w.commandId)).at(-1);
    if (candidate && random() < 0.5) {
      const answer = await operator("POST", `/operator/commands/${candidate.commandId}/cancel`, { session_id: sessionId });
      if (answer?.status === 200) cancelled.add(candidate.commandId!);
    }
    await new Promise((resolveDelay) => setTimeout(resolveDelay, 100 + random() * 700));
    await live.kill();
    live = await start();
    // Requests keyed before the crash are sent again: the server answers with the same command or creates it.
    await waitUntil(
      async () => {
        await queueOpen();
        return wanted.every((w) => w.commandId) ? true : undefined;
      },
      `every instruction queued after restart ${kill} (seed ${seed})`,
      20_000,
    );
  }

  // Cancels were awaited before each kill, so the set of cancelled instructions is exact.
  const expected = wanted.filter((w) => !cancelled.has(w.commandId!)).map((w) => w.commandId!);
  const delivered = () => commandMessages(pi).map((message) => message.details.command_id);
  await waitUntil(
    () => (expected.every((id) => delivered().includes(id)) ? true : undefined),
    `every instruction not cancelled reached the session (seed ${seed})`,
    60_000,
  );
  const dbPath = join(dataDir, "koishi.db");
  await waitUntil(
    () => {
      let rows: ReturnType<typeof commandsOnDisk>;
      try {
        rows = commandsOnDisk(dbPath, "running");
      } catch {
        return undefined; // a copy taken mid-write: look again
      }
      const states = new Map(rows.map((row) => [row.command_id, row.state]));
      return expected.every((id) => states.get(id) === "accepted") && [...cancelled].every((id) => states.get(id) === "cancelled") ? true : undefined;
    },
    `the server holds each delivered instruction accepted and each cancelled one cancelled (seed ${seed})`,
    20_000,
  );

  const counts = new Map<string, number>();
  for (const id of delivered()) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const id of expected) assert.equal(counts.get(id), 1, `instruction ${id} in the session exactly once (seed ${seed})`);
  for (const id of cancelled) assert.ok(!counts.has(id), `cancelled instruction ${id} never in the session (seed ${seed})`);
  assert.equal(counts.size, expected.length, `nothing else in the session (seed ${seed})`);
  t.diagnostic(
    `seed ${seed}: ${KILLS} SIGKILLs; ${wanted.length} instructions queued, ${expected.length} delivered into the real session exactly once, ${cancelled.size} cancelled and never delivered`,
  );
});
