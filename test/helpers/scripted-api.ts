/**
 * A real node:http server on 127.0.0.1 speaking the presence and command half of the protocol,
 * scripted by the test: it validates every request with the shared protocol schemas, keeps one
 * session's commands in memory, holds claims open for `wait_ms`, and records everything the client
 * sent, so tests can assert on the wire without the full Koishi plugin.
 *
 * It is a stand-in for the server's queue, so it must not decide anything its own way: which
 * command a claim gets, whether a claim is held, what an expiry and an ACK do and the status of a
 * refusal are the real queue's pure decisions (server/queue/decisions.ts) and the HTTP edge's table
 * (server/http/error-status.ts). Only `failNextAck` answers as the test scripts it.
 * test/server/scripted-api.test.ts runs one table of scenarios against this and the real server.
 */
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { EventEmitter, once } from "node:events";
import { randomUUID } from "node:crypto";
import type { AddressInfo } from "node:net";
import { AckBody, ClaimQuery, type ClaimAnswer, type ClaimedCommand, type CommandLane } from "../../protocol/queue.ts";
import { Heartbeat, OfflineBody } from "../../protocol/sessions.ts";
import { API_BASE_PATH } from "../../protocol/wire.ts";
import { HTTP_STATUS } from "../../server/http/error-status.ts";
import {
  ACTIVE_STATES,
  claimedCommand,
  claimPatch,
  decideAck,
  expiryPatch,
  mayHoldClaim,
  pickClaim,
  type CommandRecord,
} from "../../server/queue/decisions.ts";
import { pendingRow } from "../../server/queue/table.ts";

/** The real defaults' lease and stop time to live (notify-webhook.ts's Config). */
const LEASE_MS = 60_000;
const STOP_TTL_MS = 30_000;

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
  /** The session's commands in queue order, as the server's table holds them. */
  const records: CommandRecord[] = [];
  const ackFailures = new Map<string, { status: number; error: string }>();
  const waiters = new Set<{ query: ClaimRecord; retry: () => boolean }>();
  const liveRuntimes = new Set<string>();
  let closing = false;

  /** The running state the session's latest heartbeat gave, as the registry keeps it. */
  const runState = (sessionId: string) => api.heartbeats.findLast((beat) => beat.session_id === sessionId)?.state ?? "idle";
  /** What the server's claim does: lease the command `pickClaim` picks, or nothing. */
  const claim = (query: ClaimRecord["query"]): ClaimAnswer => {
    const now = new Date();
    const active = records.filter((record) => ACTIVE_STATES.includes(record.state));
    const claimer = { runtimeId: query.runtime_id, supportsImages: query.capabilities === "images", lane: query.lane, stopTtlMs: STOP_TTL_MS };
    const picked = pickClaim(active, now, claimer);
    if (!picked) return { command: null };
    const leaseToken = randomUUID();
    Object.assign(picked, claimPatch(picked, { token: leaseToken, runtimeId: query.runtime_id, now, leaseMs: LEASE_MS }));
    return { command: claimedCommand(picked), lease: { token: leaseToken, expires_at: picked.lease_expires_at!.toISOString() } };
  };
  /** After any change, as the server's waker does: every held claim looks again. */
  const wake = () => {
    for (const waiter of waiters) waiter.retry();
  };

  const api: ScriptedApi = {
    endpoint: "",
    token,
    heartbeats: [],
    offlines: [],
    claims: [],
    acks: [],
    log: [],
    enqueue(next) {
      const sessionId = api.heartbeats.at(-1)?.session_id;
      if (!sessionId) throw new Error("enqueue before any heartbeat: the stand-in serves the session that beats");
      const row = {
        command_id: next.command_id,
        session_id: sessionId,
        event_id: next.event_id,
        origin: next.origin,
        kind: next.kind,
        payload: next.payload ?? null,
        instruction: next.instruction,
        images: next.images,
        image_count: next.images.length,
        image_bytes: next.images.reduce((sum, image) => sum + Buffer.from(image.data, "base64").length, 0),
        image_digest: null,
        request_key: null,
        request_digest: "",
      };
      records.push({ seq: records.length + 1, ...pendingRow(row, new Date()), created_at: new Date(next.created_at) });
      wake();
    },
    failNextAck(commandId, status, error) {
      ackFailures.set(commandId, { status, error });
    },
    expireLease(commandId) {
      const record = records.find((r) => r.command_id === commandId);
      if (record?.state !== "leased") throw new Error(`no lease for ${commandId}`);
      // The lease's time is up now: what the server's sweep does then.
      const now = new Date();
      record.lease_expires_at = now;
      Object.assign(record, expiryPatch(record, now));
      wake();
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
      closing = true;
      wake();
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
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
        // A run's start ends the held instruction claims, as the server's heartbeat route wakes them.
        if (beat.state === "running") wake();
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
        const answer = (value: ClaimAnswer) => {
          record.answered = value.command?.command_id ?? null;
          send(res, 200, value);
        };
        const first = claim(query);
        if (first.command || query.wait_ms === 0 || !mayHoldClaim(query.lane, runState(query.session_id))) return answer(first);
        const waiter = {
          query: record,
          /** Claims again; answers and lets go when there is a command, the claim may no longer be held, or the server closes. */
          retry: () => {
            const next: ClaimAnswer = closing ? { command: null } : claim(query);
            if (!next.command && !closing && mayHoldClaim(query.lane, runState(query.session_id))) return false;
            clearTimeout(timer);
            waiters.delete(waiter);
            answer(next);
            return true;
          },
        };
        const timer = setTimeout(() => {
          waiters.delete(waiter);
          answer(claim(query));
        }, query.wait_ms);
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
        ackFailures.delete(commandId);
        if (failure) {
          api.acks.push({ commandId, body, status: failure.status });
          return send(res, failure.status, { error: failure.error });
        }
        const record = records.find((r) => r.command_id === commandId);
        const decision = decideAck(record, body, new Date());
        const status = decision.kind === "refuse" ? HTTP_STATUS[decision.error] : 200;
        api.acks.push({ commandId, body, status });
        if (decision.kind === "refuse") return send(res, status, { error: decision.error });
        if (decision.kind === "write") Object.assign(record!, decision.patch);
        wake();
        return send(res, 200, { state: "accepted" });
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
