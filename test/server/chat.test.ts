/**
 * The owner's chat commands through a real Koishi app and plugin-mock clients: the owner's
 * private chat, a stranger, and the owner in a group.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { TestContext } from "node:test";
import { agentApi, operatorApi } from "../../harness/agent-api.ts";
import { OWNER, STRANGER, startChat, type ChatHarness } from "../../harness/chat.ts";
import type { KoishiOptions } from "../../harness/koishi.ts";

async function chat(t: TestContext, options: KoishiOptions = {}): Promise<ChatHarness> {
  const harness = await startChat(options);
  t.after(() => harness.stop());
  return harness;
}

async function auditActions(harness: ChatHarness, prefix: string) {
  const { body } = await operatorApi(harness).audit({ limit: "200" });
  return (body.entries as { action: string; actor: string; data: any }[]).filter((e) => e.action.startsWith(prefix)).reverse();
}

test("only the owner in a private chat is answered; a stranger and the owner in a group are refused and audited", async (t) => {
  const harness = await chat(t);
  await agentApi(harness).heartbeat({ session_id: "s-1", runtime_id: "r-1", project: "shop", state: "running", activity: "bash" });

  const [listing] = await harness.owner().receive("anon.sessions");
  assert.match(listing ?? "", /在线会话（1 个）/);
  assert.match(listing ?? "", /#1 shop · .* · 运行中（bash）/);

  assert.deepEqual(await harness.stranger().receive("anon.sessions"), ["这些指令只有主人能用。"]);
  assert.deepEqual(await harness.ownerInGroup().receive("anon.sessions"), ["请在和机器人的私聊中使用这些指令。"]);

  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(
    rows.map((r) => [r.action, r.actor, r.data.command, r.data.chat.user_id, r.data.reason ?? null]),
    [
      ["chat.command", "operator", "anon.sessions", OWNER, null],
      ["chat.refused", "server", "anon.sessions", STRANGER, "stranger"],
      ["chat.refused", "server", "anon.sessions", OWNER, "group"],
    ],
  );
});

test("silent refusals answer nothing and are still audited", async (t) => {
  const harness = await chat(t, { config: { chatRefusal: "silent" } });
  await harness.stranger().shouldNotReply("anon.sessions");
  const rows = await auditActions(harness, "chat.");
  assert.deepEqual(rows.map((r) => [r.action, r.data.reason]), [["chat.refused", "stranger"]]);
});
