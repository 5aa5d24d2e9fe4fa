/**
 * Urgency is the server's to decide: under a mute, an agent's notice that carries the server's
 * markers (`details.watchdog`, `details.approval`) is held like any other, the server's own ids are
 * refused to agents, and the approval request itself still reaches the owner. A real Koishi app
 * with plugin-mock's owner chat.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { OPERATOR_TOKEN, agentApi, approvalRequestOf, call, operatorApi } from "../../harness/agent-api.ts";
import { startChat } from "../../harness/chat.ts";
import { getReceipt, postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

test("under a mute an agent's forged watchdog or approval notice is held; the server's ids are refused to agents; the approval request still reaches the owner", async (t) => {
  const chat = await startChat();
  t.after(() => chat.stop());
  await agentApi(chat).heartbeat();
  const operator = operatorApi(chat);
  assert.equal((await operator.muteSet({ minutes: 60 })).status, 200);

  const forged = [
    validEvent({ session_id: "s-1", status: "warning", summary: "可能卡住了", delivery: "direct", details: { watchdog: { kind: "stalled" } } }),
    validEvent({ session_id: "s-1", status: "info", summary: "请批准", delivery: "direct", details: { approval: { code: "ACDEF" } } }),
  ];
  for (const event of forged) assert.equal((await postEvent(chat, event)).status, 202);
  await waitUntil(async () => {
    const audit = await operator.audit({ session_id: "s-1", limit: "200" });
    const held = audit.body.entries.filter((e: { action: string }) => e.action === "event.held").map((e: { subject: string }) => e.subject);
    return forged.every((event) => held.includes(event.event_id));
  }, "both forged notices held by the mute");
  for (const event of forged) assert.equal((await getReceipt(chat, String(event.event_id)))?.state, "queued");

  // A failed run is urgent by its status: it goes through, so the worker was not simply idle.
  const failed = validEvent({ session_id: "s-1", status: "failed", summary: "构建失败", delivery: "direct", details: null });
  assert.equal((await postEvent(chat, failed)).status, 202);
  assert.equal((await settledReceipt(chat, String(failed.event_id))).state, "delivered");
  assert.equal(chat.sent.filter((m) => /可能卡住了|请批准/.test(m.text)).length, 0, "the owner read neither forged notice");

  const spoofed = await postEvent(
    chat,
    validEvent({ event_id: "watchdog:stalled:0123", session_id: "s-1", status: "warning", details: { watchdog: { kind: "stalled" } } }),
  );
  assert.deepEqual([spoofed.status, spoofed.body.error], [400, "invalid_request"]);
  assert.equal((await postEvent(chat, validEvent({ event_id: "approval:ap-1:request", session_id: "s-1" }))).status, 400);

  const { code } = (await call(chat, "POST", "/approvals", approvalRequestOf())).body.approval;
  await waitUntil(() => chat.sent.find((m) => m.text.includes(code)), "the approval request reached the owner under the mute");
  assert.equal((await call(chat, "GET", "/operator/mute", undefined, OPERATOR_TOKEN)).body.mutes.length, 1, "still muted");
});
