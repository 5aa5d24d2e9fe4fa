import { test } from "node:test";
import assert from "node:assert/strict";
import { EventBody } from "../../protocol/events.ts";
import type { Heartbeat } from "../../protocol/sessions.ts";
import { afterNotice, due, observe, watchdogEvent, type Watched, type WatchInput } from "../../server/watchdog/decisions.ts";
import { OPERATOR_TOKEN, agentApi, call, heartbeatOf, startServer } from "../../harness/agent-api.ts";
import { validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";
import { sayIn, zh } from "./say.ts";

const T0 = Date.parse("2026-11-30T03:00:00.000Z");
const MIN = 60_000;
const thresholds = { stallAfterMs: 10 * MIN };

function beat(atMs: number, overrides: Partial<Heartbeat> = {}): WatchInput {
  return {
    kind: "heartbeat",
    atMs,
    heartbeat: heartbeatOf({ state: "running", last_activity_at: new Date(T0).toISOString(), activity: "bash", ...overrides }),
  };
}

/** Feeds inputs in order; returns the final state and every episode end seen. */
function run(inputs: WatchInput[], start?: Watched) {
  let watched = start;
  const ended: string[] = [];
  for (const input of inputs) {
    const result = observe(watched, input);
    watched = result.next;
    if (result.ended) ended.push(`${result.ended.episode}:${result.ended.reason}`);
  }
  return { watched, ended };
}

test("a stall is due only for a running session whose activity and run start are both older than the threshold", () => {
  const cases: { name: string; inputs: WatchInput[]; nowMs: number; expect: ReturnType<typeof due> }[] = [
    { name: "fresh activity", inputs: [beat(T0)], nowMs: T0 + 9 * MIN, expect: null },
    { name: "old activity", inputs: [beat(T0)], nowMs: T0 + 10 * MIN, expect: { kind: "stalled", sinceMs: T0 } },
    { name: "idle never stalls", inputs: [beat(T0, { state: "idle" })], nowMs: T0 + 60 * MIN, expect: null },
    {
      name: "a run that just started after a long idle is not stalled by the old activity time",
      inputs: [beat(T0, { state: "idle" }), beat(T0 + 30 * MIN)],
      nowMs: T0 + 35 * MIN,
      expect: null,
    },
    {
      name: "the run start counts once it is old too",
      inputs: [beat(T0, { state: "idle" }), beat(T0 + 30 * MIN), beat(T0 + 39 * MIN)],
      nowMs: T0 + 40 * MIN,
      expect: { kind: "stalled", sinceMs: T0 + 30 * MIN },
    },
    {
      name: "heartbeats alone (the timer) do not move the activity",
      inputs: [beat(T0), beat(T0 + 5 * MIN), beat(T0 + 9 * MIN)],
      nowMs: T0 + 10 * MIN,
      expect: { kind: "stalled", sinceMs: T0 },
    },
  ];
  for (const c of cases) assert.deepEqual(due(run(c.inputs).watched!, c.nowMs, thresholds), c.expect, c.name);
});

test("one stall notice per episode, cleared by new activity, by going idle or by a new runtime", () => {
  const stalled = afterNotice(run([beat(T0)]).watched!, { kind: "stalled", sinceMs: T0 })!;
  assert.equal(due(stalled, T0 + 60 * MIN, thresholds), null, "no second notice for the same episode");
  assert.deepEqual(run([beat(T0 + 11 * MIN)], stalled).ended, [], "a heartbeat with the same activity keeps the episode");

  const endings: [string, WatchInput, string][] = [
    ["activity", beat(T0 + 11 * MIN, { last_activity_at: new Date(T0 + 11 * MIN).toISOString() }), "stalled:activity_resumed"],
    ["idle", beat(T0 + 11 * MIN, { state: "idle" }), "stalled:idle"],
    ["new runtime", beat(T0 + 11 * MIN, { runtime_id: "r-2" }), "stalled:new_runtime"],
    ["offline", { kind: "offline" }, "stalled:offline"],
  ];
  for (const [name, input, expected] of endings) {
    const { watched, ended } = run([input], stalled);
    assert.deepEqual(ended, [expected], name);
    if (watched) assert.equal(watched.stalledAtActivityMs, null, `${name}: episode cleared`);
  }
  // After activity resumed, a later stall is a new episode with its own notice.
  const resumed = run([beat(T0 + 11 * MIN, { last_activity_at: new Date(T0 + 11 * MIN).toISOString() })], stalled).watched!;
  assert.deepEqual(due(resumed, T0 + 21 * MIN, thresholds), { kind: "stalled", sinceMs: T0 + 11 * MIN });
});

test("expiry while running is a vanish; an offline call or an idle session is not", () => {
  const cases: { name: string; inputs: WatchInput[]; vanished: boolean }[] = [
    { name: "running, heartbeats stop", inputs: [beat(T0), { kind: "expired", atMs: T0 + MIN }], vanished: true },
    { name: "idle, heartbeats stop", inputs: [beat(T0, { state: "idle" }), { kind: "expired", atMs: T0 + MIN }], vanished: false },
    { name: "clean shutdown while running", inputs: [beat(T0), { kind: "offline" }], vanished: false },
    { name: "never seen", inputs: [{ kind: "expired", atMs: T0 }], vanished: false },
  ];
  for (const c of cases) {
    const { watched } = run(c.inputs);
    assert.equal(watched ? due(watched, T0 + MIN, thresholds)?.kind === "vanished" : false, c.vanished, c.name);
  }
  const vanished = run([beat(T0), { kind: "expired", atMs: T0 + MIN }]).watched!;
  assert.equal(afterNotice(vanished, { kind: "vanished" }), undefined, "forgotten once told: one notice");
  assert.deepEqual(run([beat(T0 + 2 * MIN)], vanished).ended, ["vanished:came_back"], "coming back before the notice ends the episode");
});

test("the notice event names the tool, never its output, and keeps one id per episode", () => {
  const watched = run([beat(T0, { project: "shop" })]).watched!;
  const event = watchdogEvent(watched, { kind: "stalled", sinceMs: T0 }, T0 + 12 * MIN, "anon", 30_000, zh);
  assert.equal(EventBody.parse(event).status, "warning");
  assert.match(event.summary, /^可能卡住：项目 shop/);
  assert.match(event.summary, /正在执行工具 bash/);
  assert.match(event.summary, /2026-11-30T03:00:00.000Z/);
  assert.deepEqual(event.details, {
    watchdog: "stalled",
    last_activity_at: "2026-11-30T03:00:00.000Z",
    activity: "bash",
    last_seen_at: "2026-11-30T03:00:00.000Z",
    running_since: "2026-11-30T03:00:00.000Z",
  });
  assert.equal(watchdogEvent(watched, { kind: "stalled", sinceMs: T0 }, T0 + 20 * MIN, "anon", 30_000, zh).event_id, event.event_id, "a retry is a duplicate");
  const vanished = run([{ kind: "expired", atMs: T0 + MIN }], watched).watched!;
  const gone = watchdogEvent(vanished, { kind: "vanished" }, T0 + MIN, "direct", 30_000, zh);
  assert.match(gone.summary, /^运行中失联：项目 shop/);
  assert.equal(gone.delivery, "direct");
  assert.notEqual(gone.event_id, event.event_id);
  const english = watchdogEvent(watched, { kind: "stalled", sinceMs: T0 }, T0 + 12 * MIN, "anon", 30_000, sayIn("en-US"));
  assert.match(
    english.summary,
    /^May be stuck: the session of project shop is running but has had no new activity for about 12 minutes\. Last activity 2026-11-30T03:00:00\.000Z, running the tool bash then\.$/,
  );
  assert.equal(english.source, "Pi watchdog · shop");
});

test("over HTTP: a stall notice takes its token from the event rate limit and goes the configured route", async (t) => {
  const server = await startServer({
    config: { eventsPerMinute: 1, eventBurst: 2, watchdogStallAfterMs: 1_000, watchdogCheckIntervalMs: 100, watchdogDelivery: "direct" },
  });
  t.after(() => server.stop());
  assert.equal((await call(server, "POST", "/events", validEvent({ session_id: "s-1" }))).status, 202, "one of two tokens used");
  const hourAgo = new Date(Date.now() - 60 * MIN).toISOString();
  assert.equal((await agentApi(server).heartbeat({ state: "running", last_activity_at: hourAgo, activity: "npm" })).status, 200);

  const accepted = await waitUntil(
    async () => {
      const answer = await call(server, "GET", "/operator/audit?session_id=s-1", undefined, OPERATOR_TOKEN);
      return (answer.body.entries as { action: string; actor: string; data: { event: EventBody } }[]).find(
        (e) => e.action === "event.accepted" && e.actor === "watchdog",
      );
    },
    "the stall notice accepted",
    20_000,
  );
  assert.equal(accepted.data.event.delivery, "direct");
  assert.equal(accepted.data.event.session_id, "s-1");
  assert.equal((await call(server, "POST", "/events", validEvent({ session_id: "s-1" }))).status, 429, "the notice took the last token");
});
