/**
 * The event worker on a real Koishi app: persona busy then free, no persona, a persona that
 * appears later, direct delivery through a real mock bot, resuming after a restart, and the
 * save-only retry after a successful injection.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import type { ForkScope } from "koishi";
import type {} from "@koishijs/plugin-mock";
import { formatDirectMessage } from "../../server/handover/direct.ts";
import { EventBody } from "../../protocol/events.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { untracedDatabase } from "../../server/koishi.ts";
import { getReceipt, postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { AgentStandIn, MockBot, MockMessenger, WorldStateStandIn, agent, withPersona, worldState } from "./persona-standin.ts";
import { waitUntil } from "../../harness/wait.ts";
import { zh } from "./say.ts";

const target = { botId: "mock:514", recipientId: "10001" };

function injectionsOf(recorded: { message: string }[], eventId: unknown): number {
  return recorded.filter((r) => r.message.includes(`"event_id": "${String(eventId)}"`)).length;
}

describe("persona injection", () => {
  test("a busy persona defers the event; it is injected once when the chat is free", async (t) => {
    const koishi = await startKoishi({ config: { ...target, injectRetryDelayMs: 5, injectMaxAttempts: 100_000 }, plugins: withPersona });
    t.after(() => koishi.stop());
    agent(koishi).busy = true;
    const event = validEvent();
    assert.equal((await postEvent(koishi, event)).status, 202);

    const waiting = await waitUntil(async () => {
      const receipt = await getReceipt(koishi, String(event.event_id));
      return receipt && receipt.attempts >= 2 ? receipt : undefined;
    }, "two busy attempts");
    assert.equal(waiting.state, "processing");
    assert.match(waiting.error ?? "", /^persona_busy: /);
    assert.equal(injectionsOf(worldState(koishi).recorded, event.event_id), 0);
    assert.equal(agent(koishi).stimuli.length, 0);

    agent(koishi).busy = false;
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "context_injected");
    assert.equal(receipt.error, null);
    assert.ok(receipt.attempts >= 3);
    assert.equal(injectionsOf(worldState(koishi).recorded, event.event_id), 1);
    assert.equal(agent(koishi).stimuli.length, 1);
  });

  test("a persona that stays busy past injectMaxAttempts fails the event with the reason", async (t) => {
    const koishi = await startKoishi({ config: { ...target, injectRetryDelayMs: 1, injectMaxAttempts: 3 }, plugins: withPersona });
    t.after(() => koishi.stop());
    agent(koishi).busy = true;
    const event = validEvent();
    await postEvent(koishi, event);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "failed");
    assert.equal(receipt.attempts, 3);
    assert.match(receipt.error ?? "", /^persona_busy: .*已尝试 3 次/);
  });

  test("without any persona an anon event fails with a clear receipt error", async (t) => {
    const koishi = await startKoishi({ config: { ...target, personaWaitMs: 0 } });
    t.after(() => koishi.stop());
    const event = validEvent();
    assert.equal((await postEvent(koishi, event)).status, 202);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "failed");
    assert.equal(receipt.error, "no_persona: 没有可用的人格（没有检测到 YesImBot v3，也没有开启 logPersona），事件没有交出去");
    // The replay tells the client the same, so it does not count the event as delivered.
    const replay = await postEvent(koishi, event);
    assert.deepEqual(replay.body, { event_id: event.event_id, state: "failed", duplicate: true, batch_max: LIMITS.eventBatchMax });
  });

  test("YesImBot loading later is picked up without restarting the plugin", async (t) => {
    const koishi = await startKoishi({
      config: { ...target, personaWaitMs: 600_000 },
      plugins: (use) => {
        use(MockBot, { selfId: "514" });
      },
    });
    const forks: ForkScope[] = [];
    t.after(async () => {
      for (const fork of forks.reverse()) fork.dispose();
      await koishi.stop();
    });
    const event = validEvent();
    await postEvent(koishi, event);
    assert.equal((await getReceipt(koishi, String(event.event_id)))?.state, "queued");

    forks.push(koishi.app.plugin(WorldStateStandIn), koishi.app.plugin(AgentStandIn));
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "context_injected");
    assert.equal(injectionsOf(worldState(koishi).recorded, event.event_id), 1);
  });
});

describe("direct delivery", () => {
  test("sends the fixed-format text through the configured bot to the configured recipient", async (t) => {
    const koishi = await startKoishi({
      config: { ...target, injectRetryDelayMs: 5, injectMaxAttempts: 3 },
      plugins: (use) => {
        use(MockBot, { selfId: "514" });
      },
    });
    t.after(() => koishi.stop());

    // MockBot cannot open a direct channel by itself; give it one and send through its own encoder.
    const bot = koishi.app.bots["mock:514"]!;
    const client = koishi.app.mock.client("10001");
    const delivered: { channelId: string; text: string }[] = [];
    client.flush = (text?: string) => {
      if (text) delivered.push({ channelId: client.event.channel!.id, text });
    };
    let sent = 0;
    bot.createDirectChannel = async (userId: string) => ({ id: `private:${userId}`, type: 1 });
    bot.sendMessage = async (channelId, fragment, _guildId, options) => {
      assert.equal(channelId, "private:10001");
      await new MockMessenger(client, options).send(fragment);
      return [`mock-message-${++sent}`];
    };
    const escapedContent: string[] = [];
    koishi.app.on("before-send", (session) => {
      escapedContent.push(session.content ?? "");
    });

    const event = validEvent({ delivery: "direct", status: "warning", summary: '上游配额 <at id="all"/> & 限流', url: "https://example.com/quota" });
    assert.equal((await postEvent(koishi, event)).status, 202);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "delivered");
    assert.equal(receipt.message_id, "mock-message-1");
    assert.equal(receipt.error, null);

    const expected = formatDirectMessage(EventBody.parse(event), zh);
    assert.deepEqual(delivered, [{ channelId: "private:10001", text: expected }]);
    assert.ok(expected.startsWith("【Pi Agent 通知 · 警告】"));
    assert.ok(expected.includes('摘要：上游配额 <at id="all"/> & 限流'));
    // Agent text travels as text, not as Satori markup: the wire form is escaped.
    assert.ok(
      escapedContent.some((content) => content.includes('摘要：上游配额 &lt;at id="all"/&gt; &amp; 限流')),
      JSON.stringify(escapedContent),
    );
  });

  test("a direct event with a missing bot is retried within bounds and fails with the reason", async (t) => {
    const koishi = await startKoishi({ config: { botId: "mock:999", recipientId: "10001", injectRetryDelayMs: 1, injectMaxAttempts: 2 } });
    t.after(() => koishi.stop());
    const event = validEvent({ delivery: "direct" });
    await postEvent(koishi, event);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "failed");
    assert.equal(receipt.attempts, 2);
    assert.match(receipt.error ?? "", /^bot_not_found: .*已尝试 2 次/);
  });

  test("a direct event without a configured recipient fails at once", async (t) => {
    const koishi = await startKoishi({ config: { botId: "mock:514", recipientId: "" } });
    t.after(() => koishi.stop());
    const event = validEvent({ delivery: "direct" });
    await postEvent(koishi, event);
    const receipt = await settledReceipt(koishi, String(event.event_id));
    assert.equal(receipt.state, "failed");
    assert.equal(receipt.attempts, 1);
    assert.match(receipt.error ?? "", /^direct_not_configured: /);
  });
});

describe("durability", () => {
  test("receipts survive a restart and pending events resume in order, without re-injecting settled ones", async (t) => {
    let withStandIns = true;
    const koishi = await startKoishi({
      config: { ...target, injectRetryDelayMs: 5, injectMaxAttempts: 100_000 },
      plugins: (use) => {
        use(MockBot, { selfId: "514" });
        if (withStandIns) {
          use(WorldStateStandIn);
          use(AgentStandIn);
        }
      },
    });
    t.after(() => koishi.stop());

    const first = validEvent();
    await postEvent(koishi, first);
    const settled = await settledReceipt(koishi, String(first.event_id));
    assert.equal(settled.state, "context_injected");

    agent(koishi).busy = true;
    const pending = [validEvent(), validEvent(), validEvent()];
    for (const event of pending) assert.equal((await postEvent(koishi, event)).status, 202);
    await waitUntil(async () => ((await getReceipt(koishi, String(pending[0]!.event_id)))?.attempts ?? 0) >= 1 || undefined, "first pending tried");

    await koishi.restart();
    assert.deepEqual(await getReceipt(koishi, String(first.event_id)), settled);
    for (const event of pending) {
      assert.equal((await settledReceipt(koishi, String(event.event_id))).state, "context_injected");
    }
    const recorded = worldState(koishi).recorded;
    assert.equal(injectionsOf(recorded, first.event_id), 0, "a settled event is not injected again");
    const order = recorded.map((r) => JSON.parse(r.message.split("\n").slice(1, -1).join("\n")).event_id);
    assert.deepEqual(
      order,
      pending.map((e) => e.event_id),
    );

    withStandIns = false;
    await koishi.restart({ personaWaitMs: 0 });
    assert.equal((await getReceipt(koishi, String(pending[1]!.event_id)))?.state, "context_injected");
  });

  test("when saving an injected receipt fails, only the save is retried and the next event goes ahead", async (t) => {
    const koishi = await startKoishi({ config: { ...target, injectRetryDelayMs: 5 }, plugins: withPersona });
    t.after(() => koishi.stop());
    const first = validEvent();
    const second = validEvent();
    // The receipt store writes through the database without cordis's tracing proxy: the stub goes there.
    const database = untracedDatabase(koishi.app);
    const realSet = database.set;
    let refuse = true;
    let refused = 0;
    database.set = async function (this: unknown, ...args: Parameters<typeof realSet>) {
      const [table, query, update] = args as unknown as [string, { event_id?: string }, { state?: string }];
      if (refuse && table === "anon_notify_event" && query.event_id === first.event_id && update.state === "context_injected") {
        refused++;
        throw new Error("disk full");
      }
      return realSet.apply(this, args);
    } as typeof realSet;
    t.after(() => {
      database.set = realSet;
    });

    await postEvent(koishi, first);
    await postEvent(koishi, second);
    const secondReceipt = await settledReceipt(koishi, String(second.event_id));
    assert.equal(secondReceipt.state, "context_injected");
    await waitUntil(() => (refused >= 2 ? true : undefined), "save refused twice");
    // This process reports what happened, even before the save lands.
    assert.equal((await getReceipt(koishi, String(first.event_id)))?.state, "context_injected");

    refuse = false;
    await waitUntil(async () => {
      const [row] = await database.get("anon_notify_event", { event_id: String(first.event_id) });
      return row?.state === "context_injected" ? row : undefined;
    }, "first receipt saved");
    assert.equal(injectionsOf(worldState(koishi).recorded, first.event_id), 1);
    assert.equal(injectionsOf(worldState(koishi).recorded, second.event_id), 1);
  });
});
