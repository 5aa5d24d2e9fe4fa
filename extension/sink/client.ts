/** The sink's only transport, `POST /event` over a Unix socket (a named pipe on Windows); the channel is one-way, so nothing is thrown. */
import { lstatSync, type Stats } from "node:fs";
import { isMissingFile } from "../../common/errors.ts";
import { Agent } from "undici";
import type { SinkEnvelope } from "../../protocol/sink.ts";

/** A hung app costs the worker at most this per event; the run never waits on it. */
const SINK_REQUEST_TIMEOUT_MS = 2_000;

export type SinkPostResult = { ok: true; status: number } | { ok: false; status?: number; reason: string };

/** Why the token must not go to what is at the socket path, or null: it must be a socket (not a link to one), this user's, writable by nobody else,
 * or another local user could sit there and collect the token. */
export function socketRefusal(stats: Pick<Stats, "isSocket" | "uid" | "mode">, uid: number): string | null {
  if (!stats.isSocket()) return "not a socket (a link or a file stands at the socket path): token not sent";
  if (stats.uid !== uid) return `the socket belongs to uid ${stats.uid}, not to you (uid ${uid}): token not sent`;
  if ((stats.mode & 0o022) !== 0) return `the socket is writable by group or others (mode ${(stats.mode & 0o777).toString(8)}): token not sent`;
  return null;
}

/** "ENOENT" when nothing is there (the app is not running), a refusal, or null to go ahead. */
function checkSocket(socketPath: string): string | null {
  try {
    return socketRefusal(lstatSync(socketPath), process.getuid!());
  } catch (error) {
    return isMissingFile(error) ? "ENOENT" : String(error);
  }
}

export function createSinkClient(socketPath: string, timeoutMs = SINK_REQUEST_TIMEOUT_MS) {
  const agent = new Agent({ connect: { socketPath, timeout: timeoutMs }, pipelining: 1 });
  return {
    async post(envelope: SinkEnvelope, token: string): Promise<SinkPostResult> {
      // One lstat: the common case "app not running" is no failed connect, and a socket someone
      // else could have put there never gets the token. Named pipes (\\.\pipe\…) are not files that can be looked at first.
      const refused = process.platform !== "win32" ? checkSocket(socketPath) : null;
      if (refused) return { ok: false, reason: refused };
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
