/**
 * A proxy on loopback in front of a real notify-webhook that can be switched into each fault the
 * extension must survive: down (connection refused), black-holed (accepts, never answers), slow,
 * 429 with `Retry-After` in seconds and as an HTTP date, 5xx, connections reset, a `failed`
 * receipt. Used by the fault tests and the fault benchmark.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from "node:http";
import { performance } from "node:perf_hooks";
import { setTimeout as delay } from "node:timers/promises";
import { request } from "undici";
import { rmSync } from "node:fs";
import { extensionEnv, writeUserConfig } from "./extension-env.ts";
import { closeAll } from "./cleanup.ts";
import { freePort, startKoishi, type KoishiHarness } from "./koishi.ts";
import { makeRoot } from "./pi.ts";

export type Fault = "down" | "black-holed" | "slow" | "429 seconds" | "429 date" | "5xx" | "reset" | "failed receipt";
export type Mode = Fault | "healthy";
export const FAULTS: Fault[] = ["down", "black-holed", "slow", "429 seconds", "429 date", "5xx", "reset", "failed receipt"];
export const SLOW_MS = 800;
export const RETRY_AFTER_S = 1;

/** A proxy on loopback in front of the real server that can be switched into each fault. */
export async function startFaultProxy(target: string) {
  const port = await freePort();
  let mode: Mode = "healthy";
  const held = new Set<ServerResponse>();
  const eventPosts: { eventId: string; mode: Mode; at: number }[] = [];
  let server: Server | undefined;

  const forward = async (req: IncomingMessage, res: ServerResponse, body: Buffer) => {
    const headers: Record<string, string> = {};
    for (const name of ["authorization", "content-type", "idempotency-key", "accept"]) {
      const value = req.headers[name];
      if (typeof value === "string") headers[name] = value;
    }
    try {
      const answer = await request(`${new URL(target).origin}${req.url}`, { method: req.method as "GET", headers, ...(req.method === "GET" ? {} : { body }) });
      const text = await answer.body.text();
      const out: Record<string, string> = { "content-type": "application/json" };
      if (answer.headers["retry-after"]) out["retry-after"] = String(answer.headers["retry-after"]);
      res.writeHead(answer.statusCode, out).end(text);
    } catch {
      res.destroy();
    }
  };

  const json = (res: ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
    res.writeHead(status, { "content-type": "application/json", ...headers }).end(JSON.stringify(body));

  const listen = async () => {
    server = createServer(async (req, res) => {
      const chunks: Buffer[] = [];
      for await (const chunk of req) chunks.push(chunk as Buffer);
      const body = Buffer.concat(chunks);
      const now = mode;
      const isEvent = req.method === "POST" && req.url?.endsWith("/events");
      const isBatch = req.method === "POST" && req.url?.endsWith("/events/batch");
      // One entry per event sent, whether alone or in a batch.
      const eventIds: string[] = isEvent
        ? [JSON.parse(body.toString("utf8")).event_id]
        : isBatch
          ? (JSON.parse(body.toString("utf8")) as { events: { event_id: string }[] }).events.map((e) => e.event_id)
          : [];
      for (const eventId of eventIds) eventPosts.push({ eventId, mode: now, at: performance.now() });
      switch (now) {
        case "black-holed":
          held.add(res);
          return;
        case "reset":
          req.socket.resetAndDestroy();
          return;
        case "5xx":
          return json(res, 502, { error: "internal_error" });
        case "429 seconds":
          return json(res, 429, { error: "rate_limited" }, { "retry-after": String(RETRY_AFTER_S) });
        case "429 date":
          // An HTTP date has whole seconds: one second ahead of the next full second.
          return json(
            res,
            429,
            { error: "rate_limited" },
            { "retry-after": new Date(Math.ceil(Date.now() / 1000) * 1000 + RETRY_AFTER_S * 1000).toUTCString() },
          );
        case "failed receipt":
          if (isEvent) return json(res, 202, { event_id: eventIds[0], state: "failed", duplicate: false });
          if (isBatch) return json(res, 200, { accepted: eventIds.map((event_id) => ({ event_id, state: "failed", duplicate: false })), refused: null });
          return forward(req, res, body);
        case "slow":
          await delay(SLOW_MS);
          return forward(req, res, body);
        default:
          return forward(req, res, body);
      }
    });
    server.on("connection", (socket) => socket.on("error", () => {}));
    await new Promise<void>((resolve) => server!.listen(port, "127.0.0.1", resolve));
  };
  const close = async () => {
    if (!server) return;
    for (const res of held) res.destroy();
    held.clear();
    server.closeAllConnections();
    await new Promise<void>((resolve) => server!.close(() => resolve()));
    server = undefined;
  };
  await listen();
  return {
    endpoint: `http://127.0.0.1:${port}${new URL(target).pathname}/events`,
    eventPosts,
    get mode() {
      return mode;
    },
    async set(next: Mode) {
      if (next === "down") await close();
      else if (!server) await listen();
      // Leaving the black hole: the held requests end as broken connections.
      if (mode === "black-holed" && next !== "black-holed") {
        for (const res of held) res.destroy();
        held.clear();
      }
      mode = next;
    },
    close,
  };
}

export type FaultProxy = Awaited<ReturnType<typeof startFaultProxy>>;

export interface FaultRig {
  koishi: KoishiHarness;
  proxy: FaultProxy;
  /** A Pi root (makeRoot) whose environment points the extension at the proxy. */
  root: string;
  close(): Promise<void>;
}

/** The real server behind the proxy, and the process environment set for Pi roots in `root`. */
export async function startFaultRig(): Promise<FaultRig> {
  const koishi = await startKoishi({ config: { logPersona: true, eventsPerMinute: 100_000, eventBurst: 100_000, watchdogEnabled: false } });
  const proxy = await startFaultProxy(koishi.baseUrl).catch(async (error: unknown) => {
    await koishi.stop();
    throw error;
  });
  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, extensionEnv(koishi, root), { ANON_NOTIFY_ENDPOINT: proxy.endpoint });
  writeUserConfig(root, { delivery: { timeoutMs: 2000, maxAttempts: 3, backoffMs: 50 } });
  return {
    koishi,
    proxy,
    root,
    async close() {
      process.env = saved;
      await closeAll(proxy.close, koishi.stop, () => rmSync(root, { recursive: true, force: true }));
    },
  };
}
