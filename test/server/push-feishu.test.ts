/**
 * The notify-only Feishu (Lark) custom bot on a real Koishi app against a loopback fake of its
 * webhook that checks the signature: a failure arrives signed, an approval request says how to
 * answer (no buttons), a rate-limited answer is retried, and the bot's 5-a-second limit holds.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { agentApi, approvalRequestOf, call, operatorApi, startServer } from "../../harness/agent-api.ts";
import { postEvent, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";
import { FEISHU_LIMITS, FeishuSender, feishuSign } from "../../server/push/feishu.ts";
import { startFakeFeishu } from "../helpers/fake-feishu.ts";

test("the signature is base64 HMAC-SHA256 keyed with timestamp, a line break and the secret, over nothing", () => {
  // Computed independently: HMAC-SHA256(key "1599360473\nsecret", "") is ab88ecc0…480ab065 (openssl and Python agree).
  const hex = "ab88ecc0d88ccb9d49e49b90579ebac896add3f950fdcfb6da420dcd480ab065";
  assert.equal(feishuSign(1599360473, "secret"), Buffer.from(hex, "hex").toString("base64"));
});

test("a failure and an approval request reach the Feishu bot signed, as plain text; a rate-limited answer is retried", async (t) => {
  const feishu = await startFakeFeishu();
  t.after(() => feishu.stop());
  const server = await startServer({ config: { feishuWebhook: feishu.url, feishuSecret: feishu.secret, pushRetryDelayMs: 20 } });
  t.after(() => server.stop());
  await agentApi(server).heartbeat();
  feishu.rateLimit(1);
  const failed = validEvent({ status: "failed", summary: '构建失败 <at user_id="all">所有人</at>' });
  await postEvent(server, failed);
  const first = await waitUntil(() => feishu.received[0], "the failure reached the bot");
  assert.equal(first.msg_type, "text");
  assert.match(first.content.text, /^Pi Agent · 失败\n来源：/);
  assert.ok(!first.content.text.includes("<at"), "an agent's <at> cannot mention anyone");
  assert.deepEqual(feishu.answers.slice(0, 2), [11232, 0], "rate-limited once, then delivered");
  const receipt = await waitUntil(async () => {
    const { body } = await call(server, "GET", `/events/${encodeURIComponent(String(failed.event_id))}`);
    return body.push?.state === "delivered" && body.push;
  }, "the push receipt");
  assert.deepEqual([receipt.route, receipt.attempts], ["feishu", 2]);

  const created = await call(server, "POST", "/approvals", approvalRequestOf());
  const code = created.body.approval.code as string;
  const request = await waitUntil(() => feishu.received.find((m) => m.content.text.startsWith(`Pi 审批 ${code}`)), "the approval request reached the bot");
  assert.match(request.content.text, new RegExp(`anon\\.approve ${code}`), "notify-only: it says how to answer");
  const health = await call(server, "GET", "/health");
  assert.deepEqual([health.body.push.route, health.body.push.answers], ["feishu", "text"]);
  const audit = (await operatorApi(server).audit({ limit: "200" })).body.entries as { action: string; data: { error?: string } }[];
  assert.match(String(audit.find((e) => e.action === "push.retrying")?.data.error), /^feishu_rate_limited: 飞书机器人限流了/);
});

test("the sender keeps the bot's limits: the sixth message in a second waits instead of being sent", async () => {
  const feishu = await startFakeFeishu();
  try {
    // The fake checks the timestamp against its own clock, as Feishu does: start from now, move by hand.
    let now = Date.now();
    const sender = new FeishuSender({ url: feishu.url, secret: feishu.secret }, () => now);
    const message = { title: "t", message: "m", priority: 3 as const, tags: [] };
    const outcomes = [];
    for (let i = 0; i < 6; i++) outcomes.push((await sender.send(message)).kind);
    assert.deepEqual(outcomes, ["delivered", "delivered", "delivered", "delivered", "delivered", "retry"]);
    assert.equal(feishu.received.length, 5, "the sixth was never sent");
    now += 1000;
    assert.equal((await sender.send(message)).kind, "delivered");
    assert.equal(FEISHU_LIMITS.length, 2);
    const big = await sender.send({ ...message, message: "x".repeat(21 * 1024) });
    assert.deepEqual([big.kind, big.kind === "refused" && big.code], ["refused", "feishu_refused"], "over 20 KB is refused before sending");
  } finally {
    await feishu.stop();
  }
});
