/**
 * The fourth attacker-style probe's cases against `npm start` (the real standalone as a child
 * process, loopback only): one noisy session, a frame flood on the presence stream, unauthenticated
 * keep-alive holders. Each case failed before its fix.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatchAccepted } from "../../protocol/events.ts";
import { freePort } from "../../harness/koishi.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { postEvent, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";

async function standalone(t: TestContext, args: string[] = []): Promise<{ server: Standalone; target: { baseUrl: string; token: string }; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-hardening-iv-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const server = await spawnStandalone(dir, await freePort(), { keepOutput: true, nodeArgs: args });
  t.after(() => server.stop());
  return { server, target: { baseUrl: server.baseUrl, token: (await readFile(join(dir, "token"), "utf8")).trim() }, dir };
}

test("one session flooding events does not hold back another session's final; the flood is told once", async (t) => {
  const { server, target } = await standalone(t);
  const statuses: number[] = [];
  let acceptedA = 0;
  for (let batch = 0; batch < 10; batch++) {
    const events = Array.from({ length: 32 }, () => validEvent({ session_id: "s-a", runtime_id: "r-a", status: "progress" }));
    const response = await fetch(`${target.baseUrl}/events/batch`, {
      method: "POST",
      headers: { authorization: `Bearer ${target.token}`, "content-type": "application/json" },
      body: JSON.stringify({ events }),
    });
    statuses.push(response.status);
    const answer = BatchAccepted.parse(await response.json());
    acceptedA += answer.accepted.length;
    if (batch > 0) assert.equal(answer.refused?.status, 429, "A is limited");
  }
  assert.ok(acceptedA < 320, `A was limited (${acceptedA} accepted)`);
  const final = validEvent({ session_id: "s-b", runtime_id: "r-b", status: "completed" });
  const answer = await postEvent(target, final);
  assert.equal(answer.status, 202, `B's final while A floods: ${JSON.stringify(answer.body)}`);
  const told = await waitUntil(() => (/s-a/.test(server.output()) && /429/.test(server.output()) ? server.output() : undefined), "the flood told in the log");
  assert.equal(told.split("\n").filter((line) => line.includes("会话 s-a 发事件超过")).length, 1, "told once");
});
