/** Connection bounds for an HTTP server we own (`npm start`): header timeouts, connections without a valid token get a small share of the cap and go
 * first, so a token holder always gets in; and a frame bound for its WebSockets. */
import type { Server as HttpServer, IncomingMessage } from "node:http";
import type { Socket } from "node:net";
import type { WebSocket } from "ws";
import { isTrusted } from "./trust.ts";

/** `checkIntervalMs`: how often Node looks for connections past the two deadlines (the figure documented is timeout + this); `perAddress` and
 * `untrusted`: connections without a valid token from one address, and from all together (a small share of `total`). */
export const CONNECTION_BOUNDS = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  perAddress: 128,
  untrusted: 256,
  total: 1024,
};
type ConnectionBounds = typeof CONNECTION_BOUNDS;

/** `requested`: it has sent at least one complete request head; `trusted`: it has presented a valid token. */
type OpenConnection<T> = { connection: T; address: string; requested: boolean; trusted: boolean };

const oldestIdleFirst = <T>(open: readonly OpenConnection<T>[]): T | undefined => (open.find((entry) => !entry.requested) ?? open[0])?.connection;

/** Which connection to close when one more arrives from `address`: none below the caps; else the oldest stranger of that address, of the address holding
 * most, or any; the newcomer only when every open connection presented a token. */
export function connectionToClose<T>(open: readonly OpenConnection<T>[], address: string, bounds: ConnectionBounds): T | "newcomer" | null {
  const strangers = open.filter((entry) => !entry.trusted);
  const ours = strangers.filter((entry) => entry.address === address);
  if (ours.length >= bounds.perAddress) return oldestIdleFirst(ours)!;
  if (strangers.length >= bounds.untrusted) {
    const counts = new Map<string, number>();
    for (const entry of strangers) counts.set(entry.address, (counts.get(entry.address) ?? 0) + 1);
    const busiest = [...counts].reduce((most, next) => (next[1] > most[1] ? next : most))[0];
    return oldestIdleFirst(strangers.filter((entry) => entry.address === busiest))!;
  }
  if (open.length < bounds.total) return null;
  return oldestIdleFirst(strangers) ?? "newcomer";
}

/** Applies `bounds` to `server`; must run before it listens, when Node reads the check interval. */
export function boundConnections(server: HttpServer, bounds: ConnectionBounds = CONNECTION_BOUNDS): void {
  server.headersTimeout = bounds.headersTimeoutMs;
  server.requestTimeout = bounds.requestTimeoutMs;
  // A public field Node reads when the server starts listening, not only a createServer option.
  (server as HttpServer & { connectionsCheckingInterval: number }).connectionsCheckingInterval = bounds.checkIntervalMs;
  // Insertion order is age order. Node's own maxConnections is not set: it would drop the newcomer, whoever it is.
  const open = new Map<Socket, { address: string; requested: boolean }>();
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const entries = [...open].map(([connection, entry]) => ({ connection, ...entry, trusted: isTrusted(connection) }));
    const close = connectionToClose(entries, address, bounds);
    if (close === "newcomer") {
      socket.destroy();
      return;
    }
    if (close) {
      open.delete(close);
      close.destroy();
    }
    open.set(socket, { address, requested: false });
    socket.once("close", () => open.delete(socket));
  });
  const markRequested = (request: IncomingMessage) => {
    const entry = open.get(request.socket);
    if (entry) entry.requested = true;
  };
  server.on("request", markRequested);
  server.on("upgrade", markRequested);
}

/** plugin-server's one WebSocketServer takes 100 MiB frames on every path: `socket` refuses a frame (or a message's fragments) longer than `maxBytes`
 * from its header on, closing 1009 without buffering it; a tighter limit already set stays. Call it in the connection handler, before any data is read
 * (ws 8: `Receiver#_maxPayload`). */
export function limitFrames(socket: WebSocket, maxBytes: number): void {
  const receiver = (socket as WebSocket & { _receiver?: { _maxPayload?: number } })._receiver;
  if (typeof receiver?._maxPayload !== "number") throw new Error("ws changed: its receiver has no frame limit to set");
  receiver._maxPayload = receiver._maxPayload > 0 ? Math.min(receiver._maxPayload, maxBytes) : maxBytes;
  // ws reports an oversized or malformed frame as an error, then closes (1009, 1002): unheard, it would end the process.
  socket.on("error", () => undefined);
}
