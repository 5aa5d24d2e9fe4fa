/**
 * Crash test of the standalone server: while a client streams events, the server process is killed
 * with SIGKILL at random moments, then restarted on the same data folder. The client re-sends what
 * it never saw answered, as Pi's sender does. At the end every event that ever got a 202 must be
 * stored and end `context_injected`, and an event may be injected twice only inside the documented
 * window: it was among the last hand-overs of a killed process (injected, receipt not yet saved).
 *
 * Injections are observed on the child's stdout: the log persona prints each block before it
 * reports success, and pipe writes are synchronous on Linux, so a printed block is a hand-over.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawn, type ChildProcessByStdio } from "node:child_process";
import type { Readable } from "node:stream";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { Agent, request } from "undici";
import { freePort } from "../helpers/koishi.ts";
import { eventually, validEvent } from "../server/client.ts";

const standalone = resolve(import.meta.dirname, "../../server/standalone.ts");
const KILLED_ROUNDS = 8;
const STREAMS = 4;
/** At most this many of a killed process's last hand-overs may be unsaved (one per lane in flight, plus one save retry). */
const DUPLICATE_WINDOW = 2;

interface Round {
  child: ChildProcessByStdio<null, Readable, Readable>;
  baseUrl: string;
  injected: string[];
  exited: Promise<void>;
}

function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state * 1664525 + 1013904223) >>> 0;
    return state / 2 ** 32;
  };
}

test("after random SIGKILLs, every accepted event is stored and injected, duplicates only in the documented window", async (t) => {
  const seed = Number(process.env.CRASH_SEED ?? Date.now() % 1_000_000);
  const random = seededRandom(seed);
  const dataDir = await mkdtemp(join(tmpdir(), "anon-notify-crash-"));
  t.after(() => rm(dataDir, { recursive: true, force: true }));
  await writeFile(join(dataDir, "server.json"), JSON.stringify({ notifyWebhook: { eventsPerMinute: 1_000_000, eventBurst: 100_000 } }));
  const port = await freePort();
  const rounds: Round[] = [];
  t.after(async () => {
    for (const round of rounds) if (round.child.exitCode === null && round.child.signalCode === null) round.child.kill("SIGKILL");
    await Promise.all(rounds.map((round) => round.exited));
  });

  async function start(): Promise<Round> {
    const child = spawn(process.execPath, [standalone, "--port", String(port), "--data-dir", dataDir], { stdio: ["ignore", "pipe", "pipe"] });
    const round: Round = { child, baseUrl: "", injected: [], exited: new Promise((done) => child.once("exit", () => done())) };
    rounds.push(round);
    let pending = "";
    let output = "";
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      output += chunk;
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop()!;
      for (const line of lines) {
        const match = /^\s*"event_id": "([^"]+)",$/.exec(line);
        if (match) round.injected.push(match[1]!);
      }
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
    round.baseUrl = await eventually(() => /接口地址：(http:\/\/\S+)/.exec(output)?.[1], `server start: ${output}`, 1000);
    return round;
  }

  const token = async () => (await readFile(join(dataDir, "token"), "utf8")).trim();
  const dispatcher = new Agent({ keepAliveTimeout: 10_000, connections: STREAMS });
  t.after(() => dispatcher.close());
  const everAccepted = new Set<string>();
  const unanswered: Record<string, unknown>[] = [];
  let sent = 0;

  async function post(baseUrl: string, bearer: string, event: Record<string, unknown>): Promise<boolean> {
    try {
      const response = await request(`${baseUrl}/events`, {
        method: "POST",
        dispatcher,
        headers: { authorization: `Bearer ${bearer}`, "idempotency-key": String(event.event_id) },
        body: JSON.stringify(event),
      });
      const body = (await response.body.json()) as { state?: string };
      if (response.statusCode === 202) {
        everAccepted.add(String(event.event_id));
        return true;
      }
      // Still loading its state after a restart: the client waits and sends again, as Pi's sender does.
      if (response.statusCode === 503) return false;
      throw new Error(`unexpected ${response.statusCode} ${JSON.stringify(body)}`);
    } catch (error) {
      if (error instanceof Error && error.message.startsWith("unexpected")) throw error;
      return false; // the server died under this request: send it again later
    }
  }

  async function stream(round: Round, bearer: string, stop: { now: boolean }) {
    await Promise.all(
      Array.from({ length: STREAMS }, async () => {
        while (!stop.now) {
          const event = unanswered.shift() ?? validEvent({ summary: `事件 ${++sent}` });
          if (!(await post(round.baseUrl, bearer, event))) unanswered.push(event);
        }
      }),
    );
  }

  for (let kill = 0; kill < KILLED_ROUNDS; kill++) {
    const round = await start();
    const bearer = await token();
    const stop = { now: false };
    const streaming = stream(round, bearer, stop);
    await new Promise((resolveDelay) => setTimeout(resolveDelay, 100 + random() * 500));
    round.child.kill("SIGKILL");
    await round.exited;
    stop.now = true;
    await streaming;
  }

  const last = await start();
  const bearer = await token();
  while (unanswered.length > 0) {
    assert.ok(await post(last.baseUrl, bearer, unanswered.shift()!), "the live server answers");
  }
  for (const eventId of everAccepted) {
    await eventually(async () => {
      const response = await request(`${last.baseUrl}/events/${encodeURIComponent(eventId)}`, { dispatcher, headers: { authorization: `Bearer ${bearer}` } });
      const receipt = (await response.body.json()) as { state?: string };
      assert.equal(response.statusCode, 200, `accepted event ${eventId} is stored (seed ${seed})`);
      return receipt.state === "context_injected" ? true : undefined;
    }, `event ${eventId} injected (seed ${seed})`);
  }
  last.child.kill("SIGINT");
  await last.exited;

  const injections = new Map<string, number>();
  for (const round of rounds) for (const id of round.injected) injections.set(id, (injections.get(id) ?? 0) + 1);
  const duplicates = [...injections].filter(([, count]) => count > 1).map(([id]) => id);
  for (const id of duplicates) {
    const firstRound = rounds.findIndex((round) => round.injected.includes(id));
    const killedRound = rounds[firstRound]!;
    assert.ok(firstRound < rounds.length - 1, `duplicate ${id} was first injected by a killed process (seed ${seed})`);
    assert.ok(killedRound.injected.slice(-DUPLICATE_WINDOW).includes(id), `duplicate ${id} was among the last hand-overs before the kill (seed ${seed})`);
    assert.equal(injections.get(id), 2, `injected at most twice (seed ${seed})`);
  }
  for (const id of everAccepted) assert.ok(injections.has(id), `accepted event ${id} was injected (seed ${seed})`);

  t.diagnostic(
    `seed ${seed}: ${KILLED_ROUNDS} SIGKILLs, ${sent} events created, ${everAccepted.size} accepted (202), ` +
      `${injections.size} injected, ${duplicates.length} injected twice inside the window`,
  );
});
