/**
 * The extension in a REAL Pi session (SDK + faux model), switched on with `/anon-notify`, talking to
 * the real notify-webhook (Koishi, SQLite, log persona) through a fault proxy on loopback
 * (harness/fault-proxy.ts). For each fault a run completes while the fault holds:
 *   - `prompt()` resolves while the webhook is still faulty (the agent never waits on the network);
 *   - a 429 is retried (how long the retry waits is the delivery unit test's, with an injected sleep);
 *   - the final notice is not lost: once the fault clears, it is delivered — by the same process's
 *     retries, or from the outbox by the next Pi start — and the persona is handed it exactly once
 *     (server idempotency + outbox), and the outbox ends empty;
 *   - the token appears in none of the extension's messages.
 *
 * What each fault costs a turn is a benchmark: `npm run bench:faults`.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { readdirSync } from "node:fs";
import { join } from "node:path";
import { dataDirFor } from "../../extension/config/config.ts";
import { AUDIT_TABLE } from "../../server/audit/store.ts";
import { EVENT_TABLE } from "../../server/events/store.ts";
import { FAULTS, startFaultRig, type FaultRig } from "../../harness/fault-proxy.ts";
import type { KoishiHarness } from "../../harness/koishi.ts";
import { ai, startPi, type PiHarness } from "../../harness/pi.ts";
import { settledReceipt } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

async function setup(t: import("node:test").TestContext): Promise<FaultRig> {
  const rig = await startFaultRig();
  t.after(() => rig.close());
  return rig;
}

async function activePi(root: string): Promise<PiHarness> {
  const pi = await startPi({ root });
  await pi.prompt("/anon-notify");
  return pi;
}

const outboxFiles = (root: string) => {
  try {
    return readdirSync(join(dataDirFor(join(root, "agent")), "outbox")).filter((name) => !name.startsWith("."));
  } catch {
    return [];
  }
};

/** How often the persona was handed each event of a session. */
async function handovers(koishi: KoishiHarness, sessionId: string): Promise<Map<string, number>> {
  const db = koishi.app.database;
  const ids = (await db.get(EVENT_TABLE, { session_id: sessionId }, ["event_id"])).map((row) => row.event_id);
  const counts = new Map(ids.map((id) => [id, 0]));
  for (const row of await db.get(AUDIT_TABLE, { action: "event.handed_to_persona", subject: ids.length ? ids : ["none"] }, ["subject"])) {
    counts.set(row.subject!, (counts.get(row.subject!) ?? 0) + 1);
  }
  return counts;
}

for (const fault of FAULTS) {
  test(`webhook ${fault}: prompt() resolves during the fault, the final notice reaches the persona once after it clears`, { timeout: 60_000 }, async (t) => {
    const { koishi, proxy, root } = await setup(t);
    const pi = await activePi(root);
    const sessionId = pi.session.sessionManager.getSessionId();
    await proxy.set(fault);
    pi.script([ai.fauxAssistantMessage(`在 ${fault} 下完成。`)]);
    await pi.prompt(`run under ${fault}`);
    assert.equal(proxy.mode, fault, "prompt() resolved while the fault still held");
    assert.equal((await handovers(koishi, sessionId)).size, 0, "nothing had reached the server when prompt() resolved");

    if (fault === "429 seconds" || fault === "429 date") {
      // Refused, then tried again after the server's Retry-After (read in both forms).
      await waitUntil(() => (proxy.eventPosts.length >= 2 ? true : undefined), "the retry after the 429", 20_000);
    }
    if (fault === "slow") {
      // Slow but within the timeout: the same process delivers it.
      await waitUntil(async () => ((await handovers(koishi, sessionId)).size === 1 ? true : undefined), "the slow notice delivered", 20_000);
    }
    await pi.dispose({ keepRoot: true });
    if (fault !== "slow") {
      // Kept, and released by the stopped process (a claim still held would be left to its owner).
      const kept = await waitUntil(() => {
        const files = outboxFiles(root);
        return files.every((name) => name.endsWith(".json")) ? files : undefined;
      }, `the ${fault} run's outbox entry released`);
      assert.equal(kept.length, 1, `the undelivered final notice is kept in the outbox (${fault})`);
    }
    await proxy.set("healthy");

    // A new Pi start (any session) sends what the outbox holds.
    const next = await startPi({ root });
    t.after(() => next.dispose({ keepRoot: true }).catch(() => undefined));
    const counts = await waitUntil(
      async () => {
        const seen = await handovers(koishi, sessionId);
        return seen.size === 1 && [...seen.values()][0] === 1 ? seen : undefined;
      },
      `the final notice of the ${fault} run reached the persona`,
      30_000,
    );
    const [eventId] = counts.keys();
    // Nothing more can arrive: the outbox is empty, both Pi runtimes are gone (the second flushed
    // its notifier) and the server has settled the event. Only then is "exactly once" a fact.
    await waitUntil(() => (outboxFiles(root).length === 0 ? true : undefined), "the outbox is empty again");
    await next.dispose({ keepRoot: true });
    await settledReceipt(koishi, eventId!);
    assert.deepEqual([...(await handovers(koishi, sessionId)).values()], [1], "handed to the persona exactly once");
    const texts = [...pi.ui, ...next.ui].map((call) => JSON.stringify(call.args)).join("\n");
    assert.ok(!texts.includes(koishi.token), "no token in the extension's messages");
    t.diagnostic(`${fault}: ${proxy.eventPosts.filter((p) => p.eventId === eventId).length} POSTs of ${eventId}, persona handed it once`);
  });
}
