/**
 * The fourth attacker-style probe's cases against `npm start` (the real standalone as a child
 * process, loopback only): one noisy session, a WebSocket frame flood, unauthenticated
 * keep-alive holders. Each case failed before its fix.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { connect, type Socket } from "node:net";
import { Agent, request } from "undici";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { BatchAccepted } from "../../protocol/events.ts";
import { freePort } from "../../harness/koishi.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { postEvent, validEvent } from "../../harness/event-client.ts";
import { waitUntil } from "../../harness/wait.ts";
import { CONSOLE_WS_PATH } from "../helpers/console.ts";

/**
 * Ctrl-C, and the process gone within a bound, exit code 0, nothing thrown. A connection mid-request
 * once kept a stopped server alive for good; a server still running after the bound fails the test (and is then killed).
 */
async function stopsCleanly(server: Standalone): Promise<void> {
  if (server.child.exitCode !== null || server.child.signalCode !== null) return;
  server.child.kill("SIGINT");
  try {
    await waitUntil(
      () => server.child.exitCode !== null || server.child.signalCode !== null || undefined,
      () => `npm start still running 20 s after Ctrl-C: ${server.output().slice(-2_000)}`,
      20_000,
    );
  } finally {
    await server.kill();
  }
  assert.equal(server.child.exitCode, 0, server.output().slice(-2_000));
  assert.match(server.output(), /已停止。/);
  assert.doesNotMatch(server.output(), /TypeError|Unhandled|route-failed|出错：/);
}

async function standalone(t: TestContext): Promise<{ server: Standalone; target: { baseUrl: string; token: string }; dir: string }> {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-hardening-iv-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const server = await spawnStandalone(dir, await freePort(), { keepOutput: true });
  t.after(() => stopsCleanly(server));
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

/** The resident memory of a process, from the kernel's own count. */
async function rssBytes(pid: number): Promise<number> {
  const status = await readFile(`/proc/${pid}/status`, "utf8");
  return Number(/^VmRSS:\s+(\d+) kB$/m.exec(status)![1]) * 1024;
}

/** The close code of a frame too large to be buffered (RFC 6455 "message too big"). */
const TOO_BIG = 1009;

/**
 * One console WebSocket that announces a text frame of `frameBytes` and then sends it in 1 MiB
 * chunks (masked with a zero key, so one chunk is reused) until the server closes the socket.
 * Resolves with the close code the server sent, if any.
 */
function floodSocket(baseUrl: string, frameBytes: number): Promise<number | undefined> {
  const url = new URL(CONSOLE_WS_PATH, baseUrl);
  return new Promise((resolve) => {
    const socket = connect(Number(url.port), url.hostname);
    const chunk = Buffer.alloc(1024 * 1024, 0x61);
    let answer = Buffer.alloc(0);
    let upgraded = false;
    let sent = 0;
    const pump = () => {
      // The server's answer (its close frame) ends the flood: what follows would only reset the socket.
      while (sent < frameBytes && !socket.destroyed && answer.length === 0) {
        sent += chunk.length;
        if (!socket.write(chunk)) return void socket.once("drain", pump);
      }
    };
    socket.on("error", () => undefined);
    socket.on("close", () => {
      const close = answer.indexOf(Buffer.from([0x88]));
      resolve(close >= 0 && answer.length >= close + 4 ? answer.readUInt16BE(close + 2) : undefined);
    });
    socket.on("data", (data) => {
      answer = Buffer.concat([answer, data]);
      if (upgraded) {
        if (answer.length >= 4) socket.end();
        return;
      }
      if (!answer.includes("\r\n\r\n")) return;
      upgraded = true;
      answer = answer.subarray(answer.indexOf("\r\n\r\n") + 4);
      const header = Buffer.alloc(14);
      header[0] = 0x81; // FIN, text
      header[1] = 0x80 | 127; // masked, 64-bit length
      header.writeBigUInt64BE(BigInt(frameBytes), 2);
      socket.write(header); // mask key: the last four bytes, zero
      pump();
    });
    socket.write(
      `GET ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
        `Sec-WebSocket-Key: ${randomBytes(16).toString("base64")}\r\nSec-WebSocket-Version: 13\r\n\r\n`,
    );
  });
}

test("npm start bounds every WebSocket frame before ws buffers it: 20 console sockets sending 90 MiB frames are closed 1009; its memory stays", async (t) => {
  const { server, target } = await standalone(t);
  const pid = server.child.pid!;
  // One small flood first, so the code it loads (the upgrade, ws's receiver) is in the figure before.
  assert.equal(await floodSocket(target.baseUrl, 20 * 1024 * 1024), TOO_BIG);
  const before = await rssBytes(pid);
  const codes = await Promise.all(Array.from({ length: 20 }, () => floodSocket(target.baseUrl, 90 * 1024 * 1024)));
  assert.deepEqual(codes, Array(20).fill(TOO_BIG));
  // Memory a flood took is given back within a bounded wait (the collector runs on its own time).
  const margin = 50 * 1024 * 1024;
  let latest = 0;
  const after = await waitUntil(
    async () => {
      latest = await rssBytes(pid);
      return latest <= before + margin ? latest : undefined;
    },
    () => `server RSS ${Math.round(before / 2 ** 20)} MiB before, ${Math.round(latest / 2 ** 20)} MiB after the flood`,
    30_000,
  );
  console.log(`server RSS: ${Math.round(before / 2 ** 20)} MiB before, ${Math.round(after / 2 ** 20)} MiB after 20 × 90 MiB frames`);
  assert.equal((await fetch(`${target.baseUrl}/health`, { headers: { authorization: `Bearer ${target.token}` } })).status, 200, "still serving");
});

test("1,024 strangers holding keep-alive connections over 127.0.0.2–9 do not lock out a client with a token from 127.0.0.1", async (t) => {
  let holding = true;
  const holders = new Set<Socket>();
  // The holders go after the test (its own Ctrl-C, asserted below, does not wait for them to leave).
  t.after(() => {
    holding = false;
    for (const socket of holders) socket.destroy();
  });
  const { server, target } = await standalone(t);
  const { port } = new URL(target.baseUrl);
  let connected = 0;
  // Each holder asks `GET /` every 3 s on one kept connection; one the server closes is replaced a second later.
  const hold = (address: string) => {
    const socket = connect({ port: Number(port), host: "127.0.0.1", localAddress: address }, () => connected++);
    const ask = () => socket.write(`GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: keep-alive\r\n\r\n`);
    const timer = setInterval(ask, 3_000);
    socket.on("connect", ask);
    socket.on("data", () => undefined);
    socket.on("error", () => undefined);
    holders.add(socket);
    socket.once("close", () => {
      clearInterval(timer);
      holders.delete(socket);
      setTimeout(() => holding && hold(address), 1_000).unref();
    });
  };
  for (let i = 0; i < 1024; i++) hold(`127.0.0.${2 + (i % 8)}`);
  await waitUntil(() => connected >= 1024 || undefined, "1,024 holders connected", 20_000);
  const answers: (number | string)[] = [];
  for (let i = 0; i < 5; i++) {
    // A fresh connection each time, as a Pi that just started would open.
    const client = new Agent({ connections: 1 });
    try {
      const response = await request(`${target.baseUrl}/health`, { dispatcher: client, headers: { authorization: `Bearer ${target.token}` } });
      await response.body.dump();
      answers.push(response.statusCode);
    } catch (error) {
      answers.push((error as { code?: string }).code ?? String(error));
    } finally {
      await client.close();
    }
  }
  console.log(`a client with a token while 1,024 strangers hold connections: ${answers.join(", ")} (${holders.size} holders open)`);
  assert.deepEqual(answers, [200, 200, 200, 200, 200]);

  // Ctrl-C while they still hold, and one client is mid-request (its body half sent): a clean stop, bounded.
  const midRequest = await halfSentBody(target);
  await stopsCleanly(server);
  assert.ok(midRequest.destroyed || (await new Promise((resolve) => midRequest.once("close", resolve))), "the half-sent request's connection closed");
});

/** A POST whose headers the server has taken (it answered `100 Continue`) and whose body never finishes. */
async function halfSentBody(target: { baseUrl: string; token: string }): Promise<Socket> {
  const url = new URL(`${target.baseUrl}/events`);
  const socket = connect(Number(url.port), url.hostname);
  socket.on("error", () => undefined);
  let answer = "";
  socket.on("data", (data) => (answer += String(data)));
  socket.write(
    `POST ${url.pathname} HTTP/1.1\r\nHost: ${url.host}\r\nAuthorization: Bearer ${target.token}\r\nContent-Type: application/json\r\n` +
      `Content-Length: 1000\r\nExpect: 100-continue\r\n\r\n`,
  );
  await waitUntil(
    () => answer.startsWith("HTTP/1.1 100 Continue") || undefined,
    () => `the server took the headers: ${answer}`,
  );
  socket.write('{"events":');
  return socket;
}
