/**
 * The sink's only transport: `POST /event` as HTTP over a Unix domain socket (a named pipe on
 * Windows), with a bearer token. It reports the outcome as a value and never throws: the caller
 * drops the event either way, because the channel is one-way and nothing waits on the app.
 */
import { existsSync } from "node:fs";
import { Agent } from "undici";
import type { SinkEnvelope } from "../../protocol/sink.ts";

/** A hung app costs the worker at most this per event; the run never waits on it. */
export const SINK_REQUEST_TIMEOUT_MS = 2_000;

export type SinkPostResult = { ok: true; status: number } | { ok: false; status?: number; reason: string };

export interface SinkClient {
  post(envelope: SinkEnvelope, token: string): Promise<SinkPostResult>;
  /** Aborts whatever is in flight and frees the socket. */
  destroy(): Promise<void>;
}

export function createSinkClient(socketPath: string, timeoutMs = SINK_REQUEST_TIMEOUT_MS): SinkClient {
  // Named pipes (\\.\pipe\…) are not files that can be looked at first.
  const checkSocketFile = process.platform !== "win32";
  const agent = new Agent({ connect: { socketPath, timeout: timeoutMs }, pipelining: 1 });
  return {
    async post(envelope, token) {
      // The common case "app not running" costs one stat, not a failed connect through the stack.
      if (checkSocketFile && !existsSync(socketPath)) return { ok: false, reason: "ENOENT" };
      try {
        const response = await agent.request({
          origin: "http://localhost",
          path: "/event",
          method: "POST",
          headers: { "content-type": "application/json", authorization: `Bearer ${token}` },
          body: JSON.stringify(envelope),
          headersTimeout: timeoutMs,
          bodyTimeout: timeoutMs,
        });
        // The answer carries nothing for us (one-way channel); read it off so the socket is reused.
        await response.body.dump();
        const { statusCode: status } = response;
        return status >= 200 && status < 300 ? { ok: true, status } : { ok: false, status, reason: `HTTP ${status}` };
      } catch (error) {
        const code = (error as { code?: unknown }).code;
        return { ok: false, reason: typeof code === "string" ? code : String(error) };
      }
    },
    async destroy() {
      await agent.destroy().catch(() => undefined);
    },
  };
}
