/** One presence stream: a WebSocket carrying one heartbeat at a time. A refusal frame becomes the same
 * ServerError as HTTP's; anything else that goes wrong is `StreamLost`, and presence falls back to HTTP. */
import type { WebSocket } from "undici";
import { type Heartbeat, type HeartbeatAnswer, StreamAnswer, type StreamRefusal } from "../../protocol/sessions.ts";
import { classifyHttpFailure } from "../server-client/retry.ts";

/** The stream is gone (or never came): the heartbeat was not answered over it. */
export class StreamLost extends Error {
  constructor(why: string) {
    super(`presence stream lost: ${why}`);
    this.name = "StreamLost";
  }
}

interface Pending {
  resolve: (answer: HeartbeatAnswer) => void;
  reject: (error: Error) => void;
  timer: ReturnType<typeof setTimeout>;
}

export interface StreamEvents {
  opened: () => void;
  lost: (why: string) => void;
  /** A quiet heartbeat was refused: the same ServerError an answered one's refusal rejects with. */
  refused: (error: Error) => void;
}

export class HeartbeatStream {
  readonly #socket: WebSocket;
  readonly #now: () => number;
  readonly #events: StreamEvents;
  #pending: Pending | undefined;
  #lost = false;
  /** Quiet heartbeats sent since the last answered one was answered: only they can be refused quietly. */
  #quietUnsettled = 0;

  /** `opened` once the handshake completes; `lost` once, when it closes or fails for any reason. */
  constructor(socket: WebSocket, events: StreamEvents, now: () => number = Date.now) {
    this.#socket = socket;
    this.#now = now;
    this.#events = events;
    socket.addEventListener("open", () => events.opened());
    socket.addEventListener("message", (event) => this.#answer(event.data));
    socket.addEventListener("close", (event) => {
      const why = `closed ${event.code}${event.reason ? ` ${event.reason}` : ""}`;
      this.#fail(why);
      events.lost(why);
    });
  }

  /**
   * Sends one heartbeat; resolves with its answer, rejects with a ServerError (refused) or
   * StreamLost. A `quiet` one resolves undefined once written (its refusal goes to `refused`).
   */
  beat(body: Heartbeat, timeoutMs: number, quiet = false): Promise<HeartbeatAnswer | undefined> {
    if (this.#lost || this.#pending) return Promise.reject(new StreamLost(this.#lost ? "closed" : "a heartbeat is in flight"));
    if (quiet) {
      this.#quietUnsettled++;
      this.#socket.send(JSON.stringify({ ...body, quiet: true }));
      return Promise.resolve(undefined);
    }
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => this.close(`no answer within ${timeoutMs} ms`), timeoutMs);
      this.#pending = { resolve, reject, timer };
      this.#socket.send(JSON.stringify(body));
    });
  }

  /** Closes it; a heartbeat in flight is rejected StreamLost. */
  close(why = "closed here"): void {
    this.#fail(why);
    this.#socket.close();
  }

  #answer(data: unknown): void {
    let frame: StreamAnswer | undefined;
    try {
      frame = StreamAnswer.parse(JSON.parse(String(data)));
    } catch {
      frame = undefined;
    }
    if (frame && "error" in frame && frame.quiet === true) {
      if (this.#quietUnsettled === 0) return this.close("a quiet refusal nobody asked for");
      this.#quietUnsettled--;
      return this.#events.refused(this.#refusal(frame));
    }
    const pending = this.#take();
    if (!pending || !frame) return this.close(pending ? "an unreadable answer" : "an answer nobody asked for");
    // Answers come in order: every quiet heartbeat sent before this one is settled.
    this.#quietUnsettled = 0;
    if ("error" in frame) pending.reject(this.#refusal(frame));
    else pending.resolve(frame);
  }

  #refusal(frame: StreamRefusal): Error {
    const headers = frame.retry_after_ms === undefined ? {} : { "retry-after": String(Math.ceil(frame.retry_after_ms / 1000)) };
    return classifyHttpFailure(frame.status, headers, this.#now(), frame.error);
  }

  #take(): Pending | undefined {
    const pending = this.#pending;
    this.#pending = undefined;
    if (pending) clearTimeout(pending.timer);
    return pending;
  }

  #fail(why: string): void {
    this.#lost = true;
    this.#take()?.reject(new StreamLost(why));
  }
}
