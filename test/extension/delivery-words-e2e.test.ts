/**
 * Why a request to the server failed reads in the session's language alone: a REAL Pi session
 * (SDK, faux model) switched on against a server that is not there (connection refused), one that
 * never answers in time and one that answers with the wrong shape. What Pi then tells the person
 * holds no sentence of the other language, only names, codes and the endpoint.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import type { DeliveryFacts } from "../../extension/server-client/decisions.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { freePort } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { otherLanguage } from "../helpers/languages.ts";

/** Names and codes that may stand in either language's text. */
const VERBATIM = [
  ...["ECONNREFUSED", "HTTP", "GET", "POST", "health", "recipient", "sessions/heartbeat", "events", "outbox", "Anon", "QQ", "Pi", "token", "endpoint"],
  // The recipient answer's fields a wrong-shaped answer lacks.
  ...["anon_qq", "qq", "status", "reason"],
];

async function listening(server: Server): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return (server.address() as AddressInfo).port;
}

const SERVERS = {
  refused: async () => ({ port: await freePort(), close: () => {} }),
  silent: async () => {
    const server = createServer(() => {});
    return { port: await listening(server), close: () => server.close() };
  },
  shapeless: async () => {
    const server = createServer((_request, response) => response.writeHead(200, { "content-type": "application/json" }).end('{"ok":1}'));
    return { port: await listening(server), close: () => server.close() };
  },
};

test("every kind of failure is worded in each language alone; anything else keeps its own text", () => {
  const facts: DeliveryFacts[] = [
    { kind: "timeout", ms: 5000 },
    { kind: "network", request: "GET health", code: "ECONNREFUSED", detail: "connect ECONNREFUSED 127.0.0.1:1" },
    { kind: "http", status: 409, serverCode: "session_offline" },
    { kind: "invalid_answer", status: 200, where: "qq" },
    { kind: "wrong_event", named: "pi:a", sent: "pi:b" },
    { kind: "batch_mismatch" },
    { kind: "receipt_failed" },
    { kind: "aborted" },
    { kind: "internal", detail: "TypeError" },
  ];
  for (const language of ["en-US", "zh-CN"] as const) {
    const why = messagesFor(language).delivery.why;
    for (const fact of facts) {
      const text = why({ facts: fact });
      assert.ok(text.length > 0);
      assert.deepEqual(otherLanguage(text, language, [...VERBATIM, "session_offline", "pi:a", "pi:b", "TypeError", "failed"]), [], `${language}: ${text}`);
    }
    assert.equal(why(new Error("EACCES: permission denied")), "EACCES: permission denied", "a system error keeps its own text");
  }
});

for (const language of ["en-US", "zh-CN"] as const) {
  for (const [name, start] of Object.entries(SERVERS)) {
    test(`(${language}) a server that is ${name}: Pi says why in ${language} alone`, { timeout: 90_000 }, async (t) => {
      const server = await start();
      const endpoint = `http://127.0.0.1:${server.port}/events`;
      const root = makeRoot();
      const savedEnv = { ...process.env };
      configureExtension(root, endpoint, { language, delivery: { timeoutMs: 1_000, maxAttempts: 1, backoffMs: 100 } });
      const pi = await startPi({ root });
      t.after(async () => {
        await pi.dispose();
        server.close();
        process.env = savedEnv;
      });
      await pi.prompt("/anon-notify");
      pi.script([ai.fauxAssistantMessage("ok")]);
      await pi.prompt("hello");
      const told = await waitUntil(
        () => {
          const lines = pi.notices().filter((n) => n.includes(endpoint) || /HTTP|ECONNREFUSED|\d+ ?(ms|毫秒)/.test(n));
          return lines.length > 0 ? lines : undefined;
        },
        () => `Pi told why:\n${pi.notices().join("\n")}`,
        30_000,
      );
      for (const line of told) assert.deepEqual(otherLanguage(line, language, [endpoint, ...VERBATIM]), [], `${language} alone:\n${line}`);
    });
  }
}
