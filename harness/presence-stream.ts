/**
 * A test and bench client for the presence stream (`GET /sessions/stream`), on undici's WebSocket as
 * the extension uses it: open with whatever headers and URL a test wants (a wrong token, the token
 * in the query), send frames, read each answer in order, see how and why the server closed it.
 */
import { type Dispatcher, WebSocket } from "undici";
import { PRESENCE_STREAM_PATH } from "../protocol/sessions.ts";
import type { ApiTarget } from "./agent-api.ts";

export interface StreamClose {
  code: number;
  reason: string;
}

export interface TestStream {
  /** Resolves when the handshake completed, rejects (with the close) if it closed first. */
  opened: Promise<void>;
  closed: Promise<StreamClose>;
  /** Sends one frame (a body is sent as JSON, a string as it is) and resolves with the next answer, parsed. */
  send(frame: unknown): Promise<any>;
  /** Sends one frame and waits for nothing (a quiet frame): whatever it is answered lands in `answers`, not in a `send`. */
  post(frame: unknown): Promise<void>;
  /** Answers received so far, parsed, in order. */
  answers: unknown[];
  socket: WebSocket;
}

export interface OpenStreamOptions {
  /** The Authorization header as sent; default `Bearer <the target's token>`, null: none. */
  authorization?: string | null;
  query?: string;
  protocols?: string[];
  dispatcher?: Dispatcher;
}

export function openStream(target: ApiTarget, options: OpenStreamOptions = {}): TestStream {
  const authorization = options.authorization === undefined ? `Bearer ${target.token}` : options.authorization;
  const url = `${target.baseUrl.replace(/^http/, "ws")}${PRESENCE_STREAM_PATH}${options.query ?? ""}`;
  const socket = new WebSocket(url, {
    headers: authorization === null ? {} : { authorization },
    protocols: options.protocols ?? [],
    ...(options.dispatcher ? { dispatcher: options.dispatcher } : {}),
  });
  const answers: unknown[] = [];
  const waiting: ((answer: unknown) => void)[] = [];
  socket.addEventListener("message", (event) => {
    const answer = JSON.parse(String(event.data));
    answers.push(answer);
    // A quiet frame's refusal is read from `answers`: it does not settle a `send`.
    if (answer?.quiet !== true) waiting.shift()?.(answer);
  });
  const closed = new Promise<StreamClose>((resolve) => socket.addEventListener("close", (event) => resolve({ code: event.code, reason: event.reason })));
  const opened = new Promise<void>((resolve, reject) => {
    socket.addEventListener("open", () => resolve());
    void closed.then((close) => reject(Object.assign(new Error(`closed ${close.code} ${close.reason}`), close)));
  });
  opened.catch(() => {}); // a test that expects a refusal reads `closed`
  return {
    opened,
    closed,
    answers,
    socket,
    async post(frame) {
      await opened;
      socket.send(typeof frame === "string" ? frame : JSON.stringify(frame));
    },
    async send(frame) {
      await opened;
      const answer = new Promise((resolve) => waiting.push(resolve));
      socket.send(typeof frame === "string" || frame instanceof Uint8Array ? frame : JSON.stringify(frame));
      return Promise.race([answer, closed.then((close) => Promise.reject(Object.assign(new Error(`closed ${close.code} ${close.reason}`), close)))]);
    },
  };
}
