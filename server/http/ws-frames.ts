/** A frame size bound applied before `ws` buffers frames: plugin-server's one WebSocketServer takes 100 MiB
 * frames on every path. */
import type { WebSocket } from "ws";

/** Makes `socket` refuse a frame (or a message's fragments) longer than `maxBytes` from its header on,
 * closing 1009 without buffering it; a tighter limit already set stays. Call it in the connection
 * handler, before any data is read (ws 8: `Receiver#_maxPayload`). */
export function limitFrames(socket: WebSocket, maxBytes: number): void {
  const receiver = (socket as WebSocket & { _receiver?: { _maxPayload?: number } })._receiver;
  if (typeof receiver?._maxPayload !== "number") throw new Error("ws changed: its receiver has no frame limit to set");
  receiver._maxPayload = receiver._maxPayload > 0 ? Math.min(receiver._maxPayload, maxBytes) : maxBytes;
  // ws reports an oversized or malformed frame as an error, then closes (1009, 1002): unheard, it would end the process.
  socket.on("error", () => undefined);
}
