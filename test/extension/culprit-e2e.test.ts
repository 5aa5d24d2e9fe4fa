/**
 * A wrong URL is named as such: a REAL Pi session (SDK, faux model) whose endpoint points at a web
 * server that is not the notify server (every path 404, as a wrong port or path gives). Switching on
 * and the heartbeat say "not the notify server: check the endpoint URL", not a bare "HTTP 404".
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { messagesFor } from "../../extension/texts/messages.ts";
import { ai, makeRoot, startPi } from "../../harness/pi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { configureExtension } from "../../harness/webhook.ts";

for (const language of ["en-US", "zh-CN"] as const) {
  test(`(${language}) an endpoint that is not the notify server is named as a wrong URL when switching on and by the heartbeat`, {
    timeout: 60_000,
  }, async (t) => {
    const m = messagesFor(language);
    const other = createServer((_request, response) => response.writeHead(404, { "content-type": "text/html" }).end("<h1>Not Found</h1>"));
    await new Promise<void>((resolve) => other.listen(0, "127.0.0.1", resolve));
    const endpoint = `http://127.0.0.1:${(other.address() as AddressInfo).port}/wrong/path/events`;
    const root = makeRoot();
    const savedEnv = { ...process.env };
    configureExtension(root, endpoint, { language });
    const pi = await startPi({ root });
    t.after(async () => {
      await pi.dispose();
      other.close();
      process.env = savedEnv;
    });

    await pi.prompt("/anon-notify");
    const notOurs = (detail: string) => m.link.cause.not_our_server(endpoint, detail);
    const switchedOn = m.toggle.unverified(notOurs("HTTP 404"));
    assert.ok(
      pi.notices().some((n) => n.startsWith(switchedOn)),
      `${switchedOn}\n---\n${pi.notices().join("\n")}`,
    );
    pi.script([ai.fauxAssistantMessage("ok")]);
    await pi.prompt("hello");
    const heartbeat = m.presence.failed(notOurs("HTTP 404"));
    await waitUntil(
      () => (pi.notices().includes(heartbeat) ? true : undefined),
      () => `${heartbeat}\n---\n${pi.notices().join("\n")}`,
      30_000,
    );
  });
}
