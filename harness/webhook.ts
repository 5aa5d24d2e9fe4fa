/**
 * A real HTTP webhook on 127.0.0.1:0 that records what the extension sends: the events route and
 * the recipient route of docs/protocol.md, answered the simple way (the real Koishi server has its
 * own tests). Also writes the extension's configuration for a Pi test root.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import type { AddressInfo } from "node:net";
import { EventBody } from "../protocol/events.ts";
import type { RecipientStatus } from "../protocol/status.ts";
import { API_BASE_PATH } from "../protocol/wire.ts";

export const TEST_TOKEN = "test-token-0123456789";
export const TEST_QQ = "123456789";
export const TEST_ANON_QQ = "987654321";

export interface RecordedEvent {
  body: EventBody;
  idempotencyKey: string | undefined;
  authorization: string | undefined;
}

export interface Webhook {
  readonly endpoint: string;
  readonly events: RecordedEvent[];
  recipientStatus: RecipientStatus;
  /** Resolves once `count` events arrived; rejects after a generous liveness bound. */
  waitForEvents(count: number): Promise<RecordedEvent[]>;
  close(): Promise<void>;
}

async function readBody(request: IncomingMessage): Promise<string> {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return Buffer.concat(chunks).toString("utf8");
}

export async function startWebhook(): Promise<Webhook> {
  const events: RecordedEvent[] = [];
  const waiters: { count: number; resolve: () => void }[] = [];
  const receipts = new Map<string, string>();
  const webhook = {
    endpoint: "",
    events,
    recipientStatus: "ok" as RecipientStatus,
    waitForEvents(count: number) {
      if (events.length >= count) return Promise.resolve(events);
      return new Promise<RecordedEvent[]>((resolve, reject) => {
        const guard = setTimeout(() => reject(new Error(`expected ${count} events, got ${events.length}`)), 20_000);
        waiters.push({
          count,
          resolve: () => {
            clearTimeout(guard);
            resolve(events);
          },
        });
      });
    },
    close: async () => {},
  };

  const server: Server = createServer(async (request, response) => {
    const reply = (status: number, body: unknown) => {
      response.writeHead(status, { "content-type": "application/json" });
      response.end(JSON.stringify(body));
    };
    if (request.headers.authorization !== `Bearer ${TEST_TOKEN}`) return reply(401, { error: "unauthorized" });
    const path = request.url?.split("?")[0];
    if (request.method === "GET" && path === `${API_BASE_PATH}/recipient`) {
      return reply(200, {
        qq: TEST_QQ,
        anon_qq: TEST_ANON_QQ,
        status: webhook.recipientStatus,
        reason: webhook.recipientStatus === "unknown" ? "not_checked" : null,
      });
    }
    if (request.method === "POST" && path === `${API_BASE_PATH}/events`) {
      const raw = await readBody(request);
      const parsed = EventBody.safeParse(JSON.parse(raw));
      if (!parsed.success) return reply(400, { error: "invalid_request" });
      const key = request.headers["idempotency-key"];
      const duplicate = receipts.has(parsed.data.event_id);
      if (!duplicate) {
        receipts.set(parsed.data.event_id, raw);
        events.push({
          body: parsed.data,
          idempotencyKey: typeof key === "string" ? key : undefined,
          authorization: request.headers.authorization,
        });
        for (const waiter of waiters.filter((w) => events.length >= w.count)) {
          waiters.splice(waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
      return reply(202, { event_id: parsed.data.event_id, state: "queued", duplicate });
    }
    return reply(404, { error: "not_found" });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  webhook.endpoint = `http://127.0.0.1:${port}${API_BASE_PATH}/events`;
  webhook.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return webhook;
}

/**
 * Points the extension of a Pi test root at `endpoint`: the user config under the root's agent
 * folder (fast retries, so a test never waits on back-off) and the environment the extension reads.
 */
export function configureExtension(root: string, endpoint: string, overrides: Record<string, unknown> = {}, token = TEST_TOKEN): void {
  const agentDir = join(root, "agent");
  const dataDir = join(agentDir, "extension-data", "anon-notify");
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(
    join(dataDir, "config.json"),
    JSON.stringify({
      endpoint,
      recipient: { qq: TEST_QQ, anonQq: TEST_ANON_QQ },
      delivery: { timeoutMs: 2000, maxAttempts: 3, backoffMs: 0 },
      ...overrides,
    }),
  );
  writeFileSync(join(dataDir, "token"), token, { mode: 0o600 });
  process.env.PI_CODING_AGENT_DIR = agentDir;
  for (const name of ["ANON_NOTIFY_ENABLED", "ANON_NOTIFY_ENDPOINT", "ANON_NOTIFY_TOKEN", "ANON_NOTIFY_SUBAGENT"]) delete process.env[name];
}
