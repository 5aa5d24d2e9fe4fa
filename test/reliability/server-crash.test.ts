/**
 * Crash run of the standalone server (`server/standalone/start.ts`, a child process): under a mixed load —
 * events, heartbeats, operator commands with images (request keys retried after a crash), claims,
 * ACKs, cancellations, leases that expire — the process is killed with SIGKILL at seeded random
 * moments and restarted on the same data folder. The command client is modelled as the extension
 * behaves: it writes a command id to its journal before it ACKs, and a command its journal already
 * holds is ACKed again but never delivered into the session a second time.
 *
 * After every kill the database file is read as it lies on disk (the state the restart loads), and
 * after every restart the live server is asked. Checked each time:
 *   - every event that ever got a 202 is stored; at the end every one is injected, and an event is
 *     injected twice only inside the documented window (among the last hand-overs of a killed
 *     process — the log persona prints each block, pipe writes are synchronous, so a printed block
 *     is a hand-over);
 *   - every command an operator request got a 2xx for exists; none is lost (at the end every one
 *     not cancelled was delivered into its session exactly once), an ACKed command is never handed
 *     out again, a cancelled one never handed out at all and stays cancelled;
 *   - no image budget leaks: final commands hold no image bytes, and the live server's budget has
 *     exactly `budget − Σ image bytes of pending+leased` free (probed with one image command of that
 *     size, which must pass, and one more image, which must get 507).
 *
 * Kill points: 50 with RELIABILITY=long (CRASH_KILLS overrides), 3 otherwise; CRASH_SEED replays.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Agent } from "undici";
import { freePort } from "../../harness/koishi.ts";
import { validEvent } from "../../harness/event-client.ts";
import { call as callApi, heartbeatOf, type Answer } from "../../harness/agent-api.ts";
import { imageOf } from "../server/images.ts";
import { LONG, commandsOnDisk, seedFrom, seededRandom } from "./support.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { waitUntil } from "../../harness/wait.ts";

const KILLS = Number(process.env.CRASH_KILLS ?? (LONG ? 50 : 3));
const EVENT_LANES = 2;
const SESSIONS = ["s-a", "s-b"];
const PROBE_SESSION = "s-probe";
/** At most this many of a killed process's last hand-overs may be unsaved (one per lane in flight, plus one save retry). */
const DUPLICATE_WINDOW = 2;
const IMAGE_BUDGET = 48 * 1024;
const LEASE_MS = 800;
/** The smallest image each probe can make at an exact size: a PNG pads only past its real minimum, a WebP from its header. */
const MIN_IMAGE = Buffer.from(imageOf("image/png", 0).data, "base64").length;
const MIN_EXACT = Buffer.from(imageOf("image/webp", 0).data, "base64").length;

test(`mixed load, ${KILLS} SIGKILLs at seeded random points: no accepted event or command lost, nothing delivered twice, no cancelled command back, no image budget leaked`, {
  timeout: LONG ? 60 * 60_000 : 120_000,
}, async (t) => {
  const seed = seedFrom("CRASH_SEED");
  const random = seededRandom(seed);
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-crash-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await writeFile(
    join(dataDir, "server.json"),
    JSON.stringify({
      notifyWebhook: {
        eventsPerMinute: 1_000_000,
        eventBurst: 100_000,
        commandLeaseMs: LEASE_MS,
        commandImageBudgetBytes: IMAGE_BUDGET,
        watchdogEnabled: false,
      },
    }),
  );
  const port = await freePort();
  const rounds: Standalone[] = [];
  t.after(() => Promise.all(rounds.map((round) => round.kill())));

  async function start(): Promise<Standalone> {
    const round = await spawnStandalone(dataDir, port);
    rounds.push(round);
    return round;
  }

  const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: 8 });
  t.after(() => dispatcher.close());
  let live: Standalone;
  let agentToken = "";
  let operatorToken = "";

  /** One request; `undefined` when the server died under it or is still loading (the client tries again later). */
  async function call(method: "GET" | "POST", path: string, auth: "agent" | "operator", body?: unknown): Promise<Answer | undefined> {
    let answer: Answer;
    try {
      answer = await callApi({ baseUrl: live.baseUrl, token: auth === "agent" ? agentToken : operatorToken, dispatcher }, method, path, body);
    } catch {
      return undefined; // the server died under the request
    }
    if (answer.status === 503) return undefined;
    if (answer.status >= 500 && answer.status !== 507)
      throw new Error(`unexpected ${answer.status} ${JSON.stringify(answer.body)} on ${method} ${path} (seed ${seed})`);
    return answer;
  }

  // ── Events, as Pi's sender: resend what was never answered. ──
  const everAccepted = new Set<string>();
  const acceptedSinceCheck: string[] = [];
  const unanswered: Record<string, unknown>[] = [];
  let eventsCreated = 0;
  /** Set for the final drain: clients only finish what they started. */
  let draining = false;
  async function eventLane(stop: { now: boolean }) {
    while (!stop.now) {
      if (draining && unanswered.length === 0) break;
      const event = unanswered.shift() ?? validEvent({ session_id: SESSIONS[eventsCreated % SESSIONS.length], summary: `事件 ${++eventsCreated}` });
      const answer = await call("POST", "/events", "agent", event);
      if (answer?.status === 202) {
        if (!everAccepted.has(String(event.event_id))) acceptedSinceCheck.push(String(event.event_id));
        everAccepted.add(String(event.event_id));
      } else if (answer) throw new Error(`event refused ${answer.status} ${JSON.stringify(answer.body)} (seed ${seed})`);
      else unanswered.push(event);
    }
  }

  // ── Commands: operator requests keyed for retry, the client's journal, cancellations. ──
  interface Wanted {
    key: string;
    session: string;
    imageBytes: number;
    commandId?: string;
    refused?: string;
  }
  const wanted: Wanted[] = [];
  const byId = new Map<string, Wanted>();
  const journal = new Set<string>(); // the client's journal: written before the ACK
  const deliveredInto = new Map<string, number>(); // command id → deliveries into its session
  const acked = new Set<string>(); // an ACK answered 200
  const cancelled = new Set<string>(); // a cancel answered 200 (or found cancelled on disk)
  const violations: string[] = [];
  let journalRecognised = 0;
  let claimsAnswered = 0;
  let cancelRefusals = 0;
  let budgetRefusals = 0;

  async function operatorLane(stop: { now: boolean }) {
    while (!stop.now) {
      const open = wanted.find((w) => !w.commandId && !w.refused);
      if (draining && !open) break;
      const item: Wanted = open ?? {
        key: `k-${wanted.length}`,
        session: SESSIONS[Math.floor(random() * SESSIONS.length)]!,
        imageBytes: random() < 0.5 ? MIN_IMAGE + Math.floor(random() * 16 * 1024) : 0,
      };
      if (!open) wanted.push(item);
      const body = {
        session_id: item.session,
        instruction: `指令 ${item.key}`,
        request_key: item.key,
        ...(item.imageBytes ? { images: [imageOf("image/png", item.imageBytes)] } : {}),
      };
      const answer = await call("POST", "/operator/commands", "operator", body);
      if (answer?.status === 201 || answer?.status === 200) {
        item.commandId = answer.body.command.command_id;
        byId.set(item.commandId!, item);
      } else if (answer?.status === 507) {
        item.refused = "image_budget_exceeded";
        budgetRefusals++;
      } else if (answer && !(answer.status === 409 && answer.body.error === "session_offline")) {
        throw new Error(`create refused ${answer.status} ${JSON.stringify(answer.body)} (seed ${seed})`);
      }
      // Now and then cancel a command that may still be pending.
      const candidates = wanted.filter((w) => w.commandId && !cancelled.has(w.commandId) && !journal.has(w.commandId));
      if (candidates.length > 0 && random() < 0.35) {
        const target = candidates[Math.floor(random() * candidates.length)]!;
        const cancel = await call("POST", `/operator/commands/${target.commandId}/cancel`, "operator", { session_id: target.session });
        if (cancel?.status === 200) cancelled.add(target.commandId!);
        else if (cancel?.status === 409) cancelRefusals++;
        else if (cancel) throw new Error(`cancel answered ${cancel.status} ${JSON.stringify(cancel.body)} (seed ${seed})`);
      }
    }
  }

  const runtimeOf = (session: string) => `r-${session}`;
  async function agentLane(session: string, stop: { now: boolean }) {
    const runtime = runtimeOf(session);
    let beat = 0;
    while (!stop.now) {
      if (beat++ % 20 === 0 && !(await call("POST", "/sessions/heartbeat", "agent", heartbeatOf({ session_id: session, runtime_id: runtime })))) continue;
      const claim = await call(
        "GET",
        `/commands?session_id=${session}&runtime_id=${runtime}&capabilities=images&wait_ms=${Math.floor(random() * 50)}`,
        "agent",
      );
      if (!claim) continue;
      if (claim.status === 409 && claim.body.error === "session_offline") {
        beat = 0;
        continue;
      }
      assert.equal(claim.status, 200, `claim ${JSON.stringify(claim.body)} (seed ${seed})`);
      const command = claim.body.command as { command_id: string } | null;
      if (!command) continue;
      claimsAnswered++;
      const id = command.command_id;
      if (acked.has(id)) violations.push(`ACKed command ${id} handed out again`);
      if (cancelled.has(id)) violations.push(`cancelled command ${id} handed out`);
      if (journal.has(id)) journalRecognised++;
      else {
        journal.add(id); // journal before ACK, as the extension does
        deliveredInto.set(id, (deliveredInto.get(id) ?? 0) + 1);
      }
      // Sometimes the client is slow to ACK: the lease expires and the server hands it out again.
      if (random() < 0.1) continue;
      const ack = await call("POST", `/commands/${id}/ack`, "agent", { session_id: session, runtime_id: runtime, lease_token: claim.body.lease.token });
      if (ack?.status === 200) acked.add(id);
      else if (ack && ack.body.error !== "lease_mismatch") throw new Error(`ack answered ${ack.status} ${JSON.stringify(ack.body)} (seed ${seed})`);
    }
  }

  // ── The checks after a kill (disk) and after a restart (live server). ──
  const dbPath = join(dataDir, "koishi.db");
  let diskChecks = 0;
  function checkDisk() {
    const rows = commandsOnDisk(dbPath);
    const stored = new Map(rows.map((row) => [row.command_id, row]));
    for (const w of wanted) if (w.commandId) assert.ok(stored.has(w.commandId), `command ${w.commandId} (answered 2xx) is stored (seed ${seed})`);
    for (const row of rows) {
      if (row.state === "cancelled" && row.session_id !== PROBE_SESSION) cancelled.add(row.command_id); // a cancel whose answer the kill swallowed
      if (row.state === "accepted" && journal.has(row.command_id)) acked.add(row.command_id); // an ACK whose answer the kill swallowed
      if (row.state === "accepted" || row.state === "cancelled")
        assert.equal(row.images, "[]", `final command ${row.command_id} holds no image bytes (seed ${seed})`);
    }
    for (const id of acked) assert.equal(stored.get(id)?.state, "accepted", `ACKed ${id} stays accepted (seed ${seed})`);
    for (const id of cancelled) {
      assert.equal(stored.get(id)?.state, "cancelled", `cancelled ${id} stays cancelled (seed ${seed})`);
      assert.ok(!deliveredInto.has(id), `cancelled ${id} was never delivered (seed ${seed})`);
    }
    diskChecks++;
    return rows
      .filter((row) => (row.state === "pending" || row.state === "leased") && row.session_id !== PROBE_SESSION)
      .reduce((sum, row) => sum + row.image_bytes, 0);
  }

  let budgetProbes = 0;
  async function checkLive(activeBytes: number) {
    for (const id of acceptedSinceCheck.splice(0)) {
      const receipt = await call("GET", `/events/${encodeURIComponent(id)}`, "agent");
      assert.equal(receipt?.status, 200, `accepted event ${id} is stored after the restart (seed ${seed})`);
    }
    // The budget's free space is exactly what the rows on disk leave: that much passes, one image more does not.
    assert.equal((await call("POST", "/sessions/heartbeat", "agent", heartbeatOf({ session_id: PROBE_SESSION, runtime_id: "r-probe" })))?.status, 200);
    const free = IMAGE_BUDGET - activeBytes;
    let fill: string | undefined;
    if (free >= MIN_EXACT) {
      const fits = await call("POST", "/operator/commands", "operator", {
        session_id: PROBE_SESSION,
        instruction: "probe",
        images: [imageOf("image/webp", free)],
      });
      assert.equal(fits?.status, 201, `an image of the ${free} free bytes fits (seed ${seed}): ${JSON.stringify(fits?.body)}`);
      fill = fits!.body.command.command_id;
    }
    const over = await call("POST", "/operator/commands", "operator", {
      session_id: PROBE_SESSION,
      instruction: "probe",
      images: [imageOf("image/webp", MIN_EXACT)],
    });
    assert.equal(over?.status, 507, `one image more is refused with 507 (free was ${free}, seed ${seed})`);
    if (fill) assert.equal((await call("POST", `/operator/commands/${fill}/cancel`, "operator", { session_id: PROBE_SESSION }))?.status, 200);
    budgetProbes++;
  }

  async function runLoad(round: Standalone, killAfterMs: number | undefined) {
    const stop = { now: false };
    const lanes = [...Array.from({ length: EVENT_LANES }, () => eventLane(stop)), operatorLane(stop), ...SESSIONS.map((session) => agentLane(session, stop))];
    if (killAfterMs === undefined) return { stop, lanes };
    await new Promise((resolveDelay) => setTimeout(resolveDelay, killAfterMs));
    await round.kill();
    stop.now = true;
    await Promise.all(lanes);
    return { stop, lanes };
  }

  live = await start();
  agentToken = (await readFile(join(dataDir, "token"), "utf8")).trim();
  operatorToken = (await readFile(join(dataDir, "operator.token"), "utf8")).trim();
  for (let kill = 0; kill < KILLS; kill++) {
    await runLoad(live, 150 + random() * 600);
    const active = checkDisk();
    live = await start();
    await checkLive(active);
  }

  // Drain: the last server runs until every request is answered, every command delivered or cancelled.
  draining = true;
  const { stop, lanes } = await runLoad(live, undefined);
  const unfinished = () => wanted.filter((w) => !(w.refused || (w.commandId && (cancelled.has(w.commandId) || acked.has(w.commandId)))));
  try {
    await waitUntil(
      () => (unanswered.length === 0 && unfinished().length === 0 ? true : undefined),
      `everything answered, delivered or cancelled (seed ${seed})`,
      60_000,
    ).catch((error: unknown) => {
      throw new Error(`${(error as Error).message}: ${unanswered.length} events unanswered, commands unfinished ${JSON.stringify(unfinished())}`);
    });
  } finally {
    // Lanes left running after a failure would keep the connection pool (and the test) open forever.
    stop.now = true;
    const ended = await Promise.allSettled(lanes);
    for (const lane of ended) if (lane.status === "rejected") throw lane.reason;
  }
  for (const eventId of everAccepted) {
    await waitUntil(async () => {
      const receipt = await call("GET", `/events/${encodeURIComponent(eventId)}`, "agent");
      assert.equal(receipt?.status, 200, `accepted event ${eventId} is stored (seed ${seed})`);
      return receipt!.body.state === "context_injected" ? true : undefined;
    }, `event ${eventId} injected (seed ${seed})`);
  }
  await live.stop();
  checkDisk();

  assert.deepEqual(violations, [], `no ACKed or cancelled command handed out (seed ${seed})`);
  for (const w of wanted) {
    if (w.refused || cancelled.has(w.commandId!)) continue;
    assert.equal(deliveredInto.get(w.commandId!), 1, `command ${w.commandId} delivered into its session exactly once (seed ${seed})`);
  }
  const injections = new Map<string, number>();
  for (const round of rounds) for (const id of round.injected) injections.set(id, (injections.get(id) ?? 0) + 1);
  const duplicates = [...injections].filter(([, count]) => count > 1).map(([id]) => id);
  for (const id of duplicates) {
    const firstRound = rounds.findIndex((round) => round.injected.includes(id));
    assert.ok(firstRound < rounds.length - 1, `duplicate ${id} was first injected by a killed process (seed ${seed})`);
    assert.ok(
      rounds[firstRound]!.injected.slice(-DUPLICATE_WINDOW).includes(id),
      `duplicate ${id} was among the last hand-overs before the kill (seed ${seed})`,
    );
    assert.equal(injections.get(id), 2, `injected at most twice (seed ${seed})`);
  }
  for (const id of everAccepted) assert.ok(injections.has(id), `accepted event ${id} was injected (seed ${seed})`);

  const commands = wanted.filter((w) => w.commandId);
  t.diagnostic(
    `seed ${seed}: ${KILLS} SIGKILLs; events ${eventsCreated} created, ${everAccepted.size} accepted (202), ${injections.size} injected, ` +
      `${duplicates.length} injected twice inside the window; commands ${commands.length} created (${wanted.length - commands.length} refused by the budget: ${budgetRefusals}), ` +
      `${journal.size} delivered once each, ${cancelled.size} cancelled and never delivered, ${cancelRefusals} cancels refused after the claim, ` +
      `${claimsAnswered} claims answered, ${journalRecognised} redeliveries recognised by the journal; ${diskChecks} disk checks, ${budgetProbes} budget probes exact`,
  );
});
