/** Which connections have presented a valid token, kept by socket, so `npm start`'s bounds let them stay. */
import type { Socket } from "node:net";

const trusted = new WeakSet<Socket>();

export function trustConnection(socket: Socket | undefined): void {
  if (socket) trusted.add(socket);
}

export function isTrusted(socket: Socket): boolean {
  return trusted.has(socket);
}
