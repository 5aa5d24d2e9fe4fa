/**
 * A real node:http server on 127.0.0.1 speaking the presence and command half of the protocol,
 * scripted by the test: it validates every request with the shared protocol schemas, keeps a
 * small in-memory queue with leases, holds claims open for `wait_ms`, and records everything the
 * client sent, so tests can assert on the wire without the full Koishi plugin.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { EventEmitter, once } from "node:events";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { AckBody, ClaimQuery, laneOf, type ClaimedCommand, type CommandLane } from "../../protocol/queue.ts";
import { Heartbeat, OfflineBody } from "../../protocol/sessions.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";

export interface ClaimRecord {
  query: ReturnType<typeof ClaimQuery.parse>;
  answered?: string | null;
}

export interface AckRecord {
  commandId: string;
  body: ReturnType<typeof AckBody.parse>;
  status: number;
}

export interface ScriptedApi {
  endpoint: string;
  token: string;
  heartbeats: Heartbeat[];
  offlines: ReturnType<typeof OfflineBody.parse>[];
  claims: ClaimRecord[];
  acks: AckRecord[];
  /** Every request line, in arrival order, e.g. `GET /commands`. */
  log: string[];
  enqueue(command: ClaimedCommand): void;
  /** Answers the next ACK of this command with this status instead of accepting it. */
  failNextAck(commandId: string, status: number, error: string): void;
  /** Puts a leased command back in the queue, as an expired lease does. */
  expireLease(commandId: string): void;
  /** Runs before an ACK is answered: lets a test look at the client's state at that moment. */
  onAck?: (commandId: string) => void;
  /** Resolves once `predicate` holds, checked at each request; fails naming `what` after `timeoutMs`. */
  until(predicate: () => boolean, what: string, timeoutMs?: number): Promise<void>;
  /** Claims held open on that lane (default: instructions). */
  waitingClaims(lane?: CommandLane): number;
  close(): Promise<void>;
}

export interface ScriptedApiOptions {
  /** What heartbeat answers say; absent, the server is a protocol-2 one (the key is not sent). */
  commandProtocol?: number;
}

export function command(id: string, instruction: string, extra: Partial<ClaimedCommand> = {}): ClaimedCommand {
  return { command_id: id, event_id: `ev-${id}`, origin: "anon", kind: "instruction", instruction, images: [], created_at: new Date().toISOString(), ...extra };
}

export async function startScriptedApi(options: ScriptedApiOptions = {}): Promise<ScriptedApi> {
  const token = "scripted-token";
  const events = new EventEmitter();
  const queue: ClaimedCommand[] = [];
  const leases = new Map<string, { command: ClaimedCommand; token: string }>();
  const ackFailures = new Map<string, { status: number; error: string }>();
  const waiters = new Set<{ query: ClaimRecord; respond: (command: ClaimedCommand | null) => void }>();
  const liveRuntimes = new Set<string>();

  const api: ScriptedApi = {
    endpoint: "",
    token,
    heartbeats: [],
    offlines: [],
    claims: [],
    acks: [],
    log: [],
    enqueue(next) {
      for (const waiter of waiters) {
        if (waiter.query.query.lane !== laneOf(next.kind)) continue;
        if (next.images.length > 0 && waiter.query.query.capabilities !== "images") continue;
        waiters.delete(waiter);
        return waiter.respond(next);
      }
      queue.push(next);
    },
    failNextAck(commandId, status, error) {
      ackFailures.set(commandId, { status, error });
    },
    expireLease(commandId) {
      const lease = leases.get(commandId);
      if (!lease) throw new Error(`no lease for ${commandId}`);
      leases.delete(commandId);
      api.enqueue(lease.command);
    },
    async until(predicate, what, timeoutMs = 10_000) {
      const deadline = Date.now() + timeoutMs;
      while (!predicate()) {
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`never happened within ${timeoutMs} ms: ${what}`);
        const stop = new AbortController();
        await once(events, "request", { signal: AbortSignal.any([stop.signal, AbortSignal.timeout(left)]) }).catch(() => undefined);
        stop.abort();
      }
    },
    waitingClaims: (lane = "instructions") => [...waiters].filter((w) => w.query.query.lane === lane).length,
    async close() {
      for (const waiter of waiters) waiter.respond(null);
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };

  const take = (capabilities: string | undefined, lane: CommandLane): ClaimedCommand | undefined => {
    const index = queue.findIndex((c) => laneOf(c.kind) === lane && (c.images.length === 0 || capabilities === "images"));
    return index < 0 ? undefined : queue.splice(index, 1)[0];
  };

  const lease = (next: ClaimedCommand) => {
    const leaseToken = randomUUID();
    leases.set(next.command_id, { command: next, token: leaseToken });
    return { command: next, lease: { token: leaseToken, expires_at: new Date(Date.now() + 60_000).toISOString() } };
  };

  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? "/", "http://127.0.0.1");
    const path = url.pathname.slice(API_BASE_PATH.length);
    api.log.push(`${req.method} ${path}`);
    try {
      if (req.headers.authorization !== `Bearer ${token}`) return send(res, 401, { error: "unauthorized" });
      if (req.method === "POST" && path === "/sessions/heartbeat") {
        const beat = Heartbeat.parse(await json(req));
        api.heartbeats.push(beat);
        liveRuntimes.add(beat.runtime_id);
        const protocol = options.commandProtocol === undefined ? {} : { command_protocol: options.commandProtocol };
        return send(res, 200, { ttl_ms: 30_000, server_time: new Date().toISOString(), ...protocol });
      }
      if (req.method === "POST" && path === "/sessions/offline") {
        const body = OfflineBody.parse(await json(req));
        api.offlines.push(body);
        return send(res, 200, { removed: liveRuntimes.delete(body.runtime_id) });
      }
      if (req.method === "GET" && path === "/commands") {
        const query = ClaimQuery.parse(Object.fromEntries(url.searchParams));
        const record: ClaimRecord = { query };
        api.claims.push(record);
        if (!liveRuntimes.has(query.runtime_id)) return send(res, 409, { error: "session_offline" });
        const ready = take(query.capabilities, query.lane);
        if (ready || query.wait_ms === 0) {
          record.answered = ready?.command_id ?? null;
          return send(res, 200, ready ? lease(ready) : { command: null });
        }
        const waiter = {
          query: record,
          respond: (next: ClaimedCommand | null) => {
            clearTimeout(timer);
            waiters.delete(waiter);
            record.answered = next?.command_id ?? null;
            send(res, 200, next ? lease(next) : { command: null });
          },
        };
        const timer = setTimeout(() => waiter.respond(null), query.wait_ms);
        // A client that gives up must not be handed a command it will never read.
        res.on("close", () => {
          clearTimeout(timer);
          if (waiters.delete(waiter)) events.emit("request");
        });
        waiters.add(waiter);
        events.emit("request");
        return;
      }
      const ack = /^\/commands\/([^/]+)\/ack$/.exec(path);
      if (req.method === "POST" && ack) {
        const commandId = decodeURIComponent(ack[1]!);
        const body = AckBody.parse(await json(req));
        api.onAck?.(commandId);
        const failure = ackFailures.get(commandId);
        const held = leases.get(commandId);
        const status = failure ? failure.status : held && held.token === body.lease_token ? 200 : 409;
        ackFailures.delete(commandId);
        api.acks.push({ commandId, body, status });
        if (status === 200) {
          leases.delete(commandId);
          return send(res, 200, { state: "accepted" });
        }
        return send(res, status, { error: failure?.error ?? "lease_mismatch" });
      }
      send(res, 404, { error: "not_found" });
    } catch (error) {
      send(res, 400, { error: "invalid_request", issues: [{ path: "", message: String(error) }] });
    }
  });
  server.listen(0, "127.0.0.1");
  await once(server, "listening");
  api.endpoint = `http://127.0.0.1:${(server.address() as AddressInfo).port}${API_BASE_PATH}/events`;

  function send(res: ServerResponse, status: number, body: unknown) {
    if (!res.writableEnded) res.writeHead(status, { "content-type": "application/json" }).end(JSON.stringify(body));
    events.emit("request");
  }
  return api;
}

async function json(req: IncomingMessage): Promise<unknown> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  return JSON.parse(Buffer.concat(chunks).toString("utf8"));
}
