/**
 * The newcomer's path on the server side, in each language as the instance speaks it: the chat
 * replies and the direct notice through a real Koishi with plugin-mock. In English no Chinese
 * character of the server's own; in Chinese no English word but names and codes.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { agentApi } from "../../harness/agent-api.ts";
import { startChat } from "../../harness/chat.ts";
import { postEvent, settledReceipt, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

const HAN = /\p{Script=Han}/u;
/** Names and codes a Chinese text may carry in Latin letters; any other English word is a stray one. */
const NAMES_AND_CODES = new Set(["pi", "agent", "anon", "tokens", "gpt", "shop", "bash", "notify"]);

function strayEnglish(text: string): string[] {
  // Commands (anon.send), session and instruction ids, model ids and URLs are codes, not words.
  const words = text.replace(/anon\.[a-z]+|#\d+|\b[0-9a-f]{8}\b|[\w-]+\/[\w./-]+|https?:\/\/\S+/g, "").match(/[A-Za-z]{2,}/g) ?? [];
  return words.filter((word) => !NAMES_AND_CODES.has(word.toLowerCase()));
}

for (const locale of ["en-US", "zh-CN"] as const) {
  test(`a newcomer whose Koishi speaks ${locale} reads the chat replies and the direct notice in it only`, async (t) => {
    const harness = await startChat({ locales: [locale] });
    t.after(() => harness.stop());
    const agent = agentApi(harness);
    await agent.heartbeat({ session_id: "s-1", runtime_id: "r-1", project: "shop", model: "openai/gpt-5", state: "running", activity: "bash" });
    const owner = harness.owner();
    const replies: string[] = [];
    for (const command of ["anon.sessions", "anon.mute 2h", "anon.status", "anon.unmute", "anon.commands", "anon.send", "anon.stop", "anon.mute 3x"]) {
      const [reply] = await owner.receive(command);
      assert.ok(reply, `${command} answers`);
      replies.push(reply);
    }
    const event = validEvent({ session_id: "s-1", delivery: "direct", status: "failed", task: "", summary: "", url: "https://example.com/run/1" });
    assert.equal((await postEvent(harness, event)).status, 202);
    assert.equal((await settledReceipt(harness, String(event.event_id))).state, "delivered");
    const notice = await waitUntil(() => harness.sent.find((message) => message.text.includes(String(event.event_id)))?.text, "the direct notice");
    const texts = [...replies, notice];
    if (locale === "en-US") {
      for (const text of texts) assert.doesNotMatch(text, HAN, text);
      assert.match(replies[0]!, /^Online sessions \(1\):\n#1 shop · openai\/gpt-5 · running \(bash\) · active \d+ seconds? ago/);
      assert.match(notice, /^\[Pi Agent notice · failed\]\nSource: .*\nTask: \(none\)\nSummary: \(none\)/);
    } else {
      for (const text of texts) assert.deepEqual(strayEnglish(text.replace(String(event.source), "").replace(String(event.event_id), "")), [], text);
      assert.match(replies[0]!, /^在线会话（1 个）：\n#1 shop · openai\/gpt-5 · 运行中（bash） · \d+秒钟前活动/);
      assert.match(notice, /^【Pi Agent 通知 · 失败】\n来源：.*\n任务：（无）\n摘要：（无）/);
    }
  });
}
