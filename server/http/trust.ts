/**
 * Which connections have presented a valid token (the agents', the operator's, the console's): the
 * HTTP edge and the console's sign-in mark them, and `npm start`'s connection bounds let a marked
 * connection stay when strangers fill the server (connections.ts). Kept by the socket, so a closed one is forgotten.
 */
import type { Socket } from "node:net";

const trusted = new WeakSet<Socket>();

export function trustConnection(socket: Socket | undefined): void {
  if (socket) trusted.add(socket);
}

export function isTrusted(socket: Socket): boolean {
  return trusted.has(socket);
}
