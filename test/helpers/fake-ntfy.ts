/**
 * A loopback stand-in for an ntfy server's JSON publish API (docs: "Publish as JSON"): `POST /`
 * with `{"topic","title","message","priority","tags","actions",…}`, bearer auth on a protected
 * topic, ntfy's error shape, and `429` on demand (ntfy sends no `Retry-After`). It records what it
 * accepted, and presses an action button the way the phone does: the `http` action's method,
 * headers and body sent to its URL.
 */
import { createServer, type IncomingMessage, type Server } from "node:http";
import type { AddressInfo } from "node:net";

export interface Published {
  topic: string;
  title?: string;
  message?: string;
  priority?: number;
  tags?: string[];
  actions?: Array<{ action: string; label: string; url: string; method?: string; headers?: Record<string, string>; body?: string; clear?: boolean }>;
  /** Every other key the publisher sent (click, attach, icon, markdown, …): a real server would act on them. */
  extra: Record<string, unknown>;
}

export interface FakeNtfy {
  url: string;
  token: string;
  topic: string;
  published: Published[];
  /** Every request, answered or refused, with its status. */
  requests: Array<{ status: number; authorization: string | undefined }>;
  /** The next `count` publishes are answered `429` as ntfy does, with `retryAfter` seconds if given (ntfy itself sends none). */
  rateLimit(count: number, retryAfter?: string): void;
  /** The next `count` publishes are answered with `status` and ntfy's error body. */
  fail(count: number, status: number): void;
  /** Presses a button as the phone would; answers the server's status and JSON body. */
  press(action: NonNullable<Published["actions"]>[number]): Promise<{ status: number; body: unknown }>;
  stop(): Promise<void>;
}

const KNOWN = new Set(["topic", "title", "message", "priority", "tags", "actions"]);

function readAll(request: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    request.on("data", (chunk: Buffer) => chunks.push(chunk));
    request.on("end", () => resolve(Buffer.concat(chunks).toString("utf8")));
    request.on("error", reject);
  });
}

export async function startFakeNtfy(options: { token?: string; topic?: string } = {}): Promise<FakeNtfy> {
  const token = options.token ?? "tk_fake0123456789abcdefghijklmn";
  const topic = options.topic ?? "pi-owner-topic";
  const published: Published[] = [];
  const requests: FakeNtfy["requests"] = [];
  const faults: Array<{ status: number; retryAfter?: string | undefined }> = [];
  const server: Server = createServer(async (request, response) => {
    const answer = (status: number, body: unknown, headers: Record<string, string> = {}) => {
      requests.push({ status, authorization: request.headers.authorization });
      response.writeHead(status, { "content-type": "application/json", ...headers });
      response.end(`${JSON.stringify(body)}\n`);
    };
    const text = await readAll(request);
    if (request.method !== "POST" || request.url !== "/") return answer(404, { code: 40401, http: 404, error: "page not found" });
    if (request.headers.authorization !== `Bearer ${token}`) return answer(401, { code: 40101, http: 401, error: "unauthorized" });
    const fault = faults.shift();
    if (fault?.status === 429)
      return answer(
        429,
        { code: 42901, http: 429, error: "limit reached: too many requests, please be nice" },
        fault.retryAfter ? { "retry-after": fault.retryAfter } : {},
      );
    if (fault) return answer(fault.status, { code: fault.status * 100 + 1, http: fault.status, error: "fault injected" });
    let body: Record<string, unknown>;
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      return answer(400, { code: 40024, http: 400, error: "invalid request: request body must be valid JSON" });
    }
    if (body.topic !== topic) return answer(403, { code: 40301, http: 403, error: "forbidden" });
    const extra = Object.fromEntries(Object.entries(body).filter(([key]) => !KNOWN.has(key)));
    published.push({ ...(body as unknown as Published), extra });
    answer(200, { id: `m${published.length}`, time: Math.floor(Date.now() / 1000), event: "message", topic });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}`,
    token,
    topic,
    published,
    requests,
    rateLimit(count, retryAfter) {
      for (let i = 0; i < count; i++) faults.push({ status: 429, retryAfter });
    },
    fail(count, status) {
      for (let i = 0; i < count; i++) faults.push({ status });
    },
    async press(action) {
      if (action.action !== "http") throw new Error(`only http actions make a request, not ${action.action}`);
      const response = await fetch(action.url, {
        method: action.method ?? "POST",
        headers: action.headers ?? {},
        ...(action.body === undefined ? {} : { body: action.body }),
      });
      const text = await response.text();
      return { status: response.status, body: text ? JSON.parse(text) : null };
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
