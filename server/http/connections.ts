/**
 * Bounds on the connections of an HTTP server we own (`npm start`): a socket that has not sent its
 * headers within a few seconds is closed, Node checks for such sockets every second, and one
 * remote address holds at most `perAddress` connections under a higher global cap. When an address
 * is at its cap, its oldest connection that never sent a request gives way to the newcomer, so idle
 * sockets cannot lock out a client that actually asks for something, even from the same address.
 *
 * Inside someone else's Koishi the HTTP server belongs to plugin-server and its owner; the plugin
 * does not change it (docs/reliability.md says what that leaves open).
 */
import type { Server as HttpServer, IncomingMessage } from "node:http";
import type { Socket } from "node:net";

export interface ConnectionBounds {
  /** A request's headers must be complete this long after the connection (or the previous request). */
  headersTimeoutMs: number;
  /** A whole request (headers and body) must arrive within this. */
  requestTimeoutMs: number;
  /** How often Node looks for connections past those deadlines: the figure documented is timeout + this. */
  checkIntervalMs: number;
  perAddress: number;
  total: number;
}

export const CONNECTION_BOUNDS: ConnectionBounds = {
  headersTimeoutMs: 5_000,
  requestTimeoutMs: 30_000,
  checkIntervalMs: 1_000,
  perAddress: 128,
  total: 1024,
};

export interface OpenConnection<T> {
  connection: T;
  /** It has sent at least one complete request head. */
  requested: boolean;
}

/**
 * Which connection to close when one more arrives from an address holding `open` (oldest first):
 * none below the cap, else the oldest one that never sent a request, else the newcomer.
 */
export function connectionToClose<T>(open: readonly OpenConnection<T>[], perAddress: number): T | "newcomer" | null {
  if (open.length < perAddress) return null;
  return open.find((entry) => !entry.requested)?.connection ?? "newcomer";
}

/** Applies `bounds` to `server`; must run before it listens, when Node reads the check interval. */
export function boundConnections(server: HttpServer, bounds: ConnectionBounds = CONNECTION_BOUNDS): void {
  server.headersTimeout = bounds.headersTimeoutMs;
  server.requestTimeout = bounds.requestTimeoutMs;
  // A public field Node reads when the server starts listening, not only a createServer option.
  (server as HttpServer & { connectionsCheckingInterval: number }).connectionsCheckingInterval = bounds.checkIntervalMs;
  server.maxConnections = bounds.total;
  // Insertion order is age order: the first idle entry is the oldest.
  const byAddress = new Map<string, Map<Socket, OpenConnection<Socket>>>();
  server.on("connection", (socket: Socket) => {
    const address = socket.remoteAddress ?? "";
    const open = byAddress.get(address) ?? new Map<Socket, OpenConnection<Socket>>();
    byAddress.set(address, open);
    const close = connectionToClose([...open.values()], bounds.perAddress);
    if (close === "newcomer") {
      socket.destroy();
      return;
    }
    if (close) {
      open.delete(close);
      close.destroy();
    }
    open.set(socket, { connection: socket, requested: false });
    socket.once("close", () => {
      open.delete(socket);
      if (open.size === 0 && byAddress.get(address) === open) byAddress.delete(address);
    });
  });
  const markRequested = (request: IncomingMessage) => {
    const entry = byAddress.get(request.socket.remoteAddress ?? "")?.get(request.socket);
    if (entry) entry.requested = true;
  };
  server.on("request", markRequested);
  server.on("upgrade", markRequested);
}
