/** The presence stream (`GET /sessions/stream`): heartbeats over one WebSocket per runtime, through the same
 * token check and HeartbeatService as HTTP, with the bounds a kept socket needs. */
import type { Socket } from "node:net";
import type { Context } from "koishi";
import type { WebSocket } from "ws";
import { errorText } from "../../common/errors.ts";
import { PRESENCE_STREAM_PATH, STREAM_CLOSE, splitStreamFrame, type StreamRefusal } from "../../protocol/sessions.ts";
import { API_BASE_PATH, LIMITS } from "../../protocol/wire.ts";
import { DomainError } from "../../common/domain-error.ts";
import { parseJson, type HttpApi } from "./api.ts";
import { HTTP_STATUS } from "./error-status.ts";
import { limitFrames } from "./ws-frames.ts";
import { instanceText } from "../locales/load.ts";
import type { HeartbeatService } from "../sessions/heartbeats.ts";

/** A closing stream's socket is dropped this long after its close frame, answered or not. */
const CLOSE_GRACE_MS = 1_000;
/** Answers a client leaves unread beyond this close its stream (each answer is ~120 bytes). */
const MAX_UNREAD_BYTES = 1024 * 1024;
const IDLE_CHECK_MAX_MS = 5_000;

export interface PresenceStreamDeps {
  api: HttpApi;
  heartbeats: HeartbeatService;
  /** A stream that sends no complete frame for this long is closed (the registry's TTL). */
  idleMs: number;
  /** Streams open at once over the agent token. */
  maxStreams: number;
}

interface Stream {
  socket: WebSocket;
  /** The TCP socket under it (kept instead of the handshake request, which a held stream does not need). */
  raw: Socket;
  runtimeId: string | undefined;
  lastFrameMs: number;
}

/** Closes with `code`, stops reading at once (nothing more of a refused or oversized peer is buffered), drops the socket soon after. */
function shut(socket: WebSocket, raw: Socket, code: number, reason: string): void {
  socket.close(code, reason);
  raw.pause();
  setTimeout(() => socket.terminate(), CLOSE_GRACE_MS).unref();
}

function refusal(error: DomainError): StreamRefusal {
  return {
    error: error.code,
    status: HTTP_STATUS[error.code],
    ...(error.issues ? { issues: error.issues } : {}),
    ...(error.retryAfterSeconds === undefined ? {} : { retry_after_ms: Math.max(0, Math.ceil(error.retryAfterSeconds * 1000)) }),
  };
}

export const PresenceStream = {
  name: "notify-webhook-presence-stream",
  reusable: true,
  apply(ctx: Context, { api, heartbeats, idleMs, maxStreams }: PresenceStreamDeps) {
    const logger = ctx.logger("notify-webhook");
    const open = new Set<Stream>();
    const byRuntime = new Map<string, Stream>();
    api.offer(ctx, "presence_stream");
    heartbeats.streamOffered = true;
    ctx.on("dispose", () => {
      heartbeats.streamOffered = false;
    });

    const forget = (stream: Stream) => {
      open.delete(stream);
      if (stream.runtimeId !== undefined && byRuntime.get(stream.runtimeId) === stream) byRuntime.delete(stream.runtimeId);
    };
    const end = (stream: Stream, code: number, reason: string) => {
      forget(stream);
      shut(stream.socket, stream.raw, code, reason);
    };

    // Binds the stream to the runtime of its first valid heartbeat; a newer stream of that runtime replaces the older one.
    const bind = (stream: Stream, runtimeId: string) => {
      if (stream.runtimeId === runtimeId) return;
      if (stream.runtimeId !== undefined) {
        throw new DomainError("invalid_request", { issues: [{ path: "runtime_id", message: "this stream belongs to another runtime" }] });
      }
      stream.runtimeId = runtimeId;
      const older = byRuntime.get(runtimeId);
      if (older) end(older, STREAM_CLOSE.replaced, "replaced");
      byRuntime.set(runtimeId, stream);
    };

    // Undefined: an accepted quiet frame, answered by nothing (docs/protocol.md, "Quiet frames").
    const answer = (stream: Stream, frame: Buffer): object | undefined => {
      let quiet = false;
      try {
        const split = splitStreamFrame(parseJson(frame));
        quiet = split.quiet;
        const accepted = heartbeats.receive(split.body, (heartbeat) => bind(stream, heartbeat.runtime_id));
        return quiet ? undefined : accepted.answer;
      } catch (error) {
        if (error instanceof DomainError) return quiet ? { ...refusal(error), quiet } : refusal(error);
        logger.error(instanceText(ctx, "anon-notify.log.route-failed", { method: "WS", path: PRESENCE_STREAM_PATH, error: errorText(error) }));
        return { error: "internal_error", status: HTTP_STATUS.internal_error } satisfies StreamRefusal;
      }
    };

    ctx.server.ws(API_BASE_PATH + PRESENCE_STREAM_PATH, (socket, request) => {
      // A heartbeat's size, before any buffering: a flood of large frames never reaches memory.
      limitFrames(socket, LIMITS.heartbeatBodyBytes);
      try {
        api.admitAgent(request);
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        return shut(socket, request.socket, STREAM_CLOSE.refusedBase + HTTP_STATUS[error.code], error.code);
      }
      if (open.size >= maxStreams) return shut(socket, request.socket, STREAM_CLOSE.full, "full");
      const stream: Stream = { socket, raw: request.socket, runtimeId: undefined, lastFrameMs: Date.now() };
      open.add(stream);
      socket.on("close", () => forget(stream));
      socket.on("message", (data, isBinary) => {
        if (!open.has(stream)) return; // closing: what still arrives is not read
        if (isBinary) return end(stream, STREAM_CLOSE.binary, "binary");
        // The default binaryType: one Buffer per message, however many fragments it came in.
        const frame = data as Buffer;
        if (frame.length > LIMITS.heartbeatBodyBytes) return end(stream, STREAM_CLOSE.tooBig, "payload_too_large");
        stream.lastFrameMs = Date.now();
        const said = answer(stream, frame);
        if (said !== undefined) socket.send(JSON.stringify(said));
        if (socket.bufferedAmount > MAX_UNREAD_BYTES) end(stream, STREAM_CLOSE.policy, "unread");
      });
    });

    // A trickled frame is not a complete one: a socket that only trickles is idle too.
    ctx.setInterval(
      () => {
        const now = Date.now();
        for (const stream of open) {
          if (now - stream.lastFrameMs >= idleMs) end(stream, STREAM_CLOSE.idle, "idle");
        }
      },
      Math.min(IDLE_CHECK_MAX_MS, idleMs),
    );
  },
};
