/**
 * A minimal app side of the local sink: listens on the socket, checks the bearer token, validates
 * each body against the wire schema and records it. Used by `npm run sink:listen` (for people
 * wiring up an app) and by the tests. Answers 204, 401 without the right token, 400 on a bad body.
 */
import { timingSafeEqual } from "node:crypto";
import { chmodSync, rmSync } from "node:fs";
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import { SinkEnvelope } from "../protocol/sink.ts";
import { formatIssues } from "../protocol/wire.ts";

const MAX_BODY_BYTES = 64 * 1024;

export interface SinkListenerOptions {
  socket: string;
  token: string;
  onEvent?: (envelope: SinkEnvelope) => void;
  onRejected?: (status: number, reason: string) => void;
  /** Answer only after this long (a slow app); `Infinity` never answers (a hung app). */
  answerDelayMs?: number;
}

export interface SinkListener {
  readonly events: SinkEnvelope[];
  /** The accepted bodies exactly as they arrived, before the schema dropped unknown keys. */
  readonly bodies: string[];
  readonly rejected: { status: number; reason: string }[];
  /** Connections accepted so far: proves whether anything knocked at all. */
  readonly connections: number;
  /** Resolves once the recorded events satisfy `done`. */
  waitFor(done: (events: SinkEnvelope[]) => boolean): Promise<SinkEnvelope[]>;
  close(): Promise<void>;
}

function bearerMatches(header: string | undefined, token: string): boolean {
  const given = Buffer.from(header?.startsWith("Bearer ") ? header.slice("Bearer ".length) : "");
  const expected = Buffer.from(token);
  return given.length === expected.length && timingSafeEqual(given, expected);
}

async function readBody(request: IncomingMessage): Promise<string | undefined> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const chunk of request as AsyncIterable<Buffer>) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  return Buffer.concat(chunks).toString("utf8");
}

export async function startSinkListener(options: SinkListenerOptions): Promise<SinkListener> {
  const events: SinkEnvelope[] = [];
  const bodies: string[] = [];
  const rejected: { status: number; reason: string }[] = [];
  const waiters = new Set<() => void>();
  let connections = 0;
  const timers = new Set<NodeJS.Timeout>();

  const answer = (response: ServerResponse, status: number, reason?: string) => {
    if (reason !== undefined) {
      rejected.push({ status, reason });
      options.onRejected?.(status, reason);
    }
    const send = () => response.writeHead(status).end();
    const delay = options.answerDelayMs ?? 0;
    if (delay === 0) return send();
    if (delay === Infinity) return;
    const timer = setTimeout(() => {
      timers.delete(timer);
      send();
    }, delay);
    timers.add(timer);
  };

  const server = createServer(async (request, response) => {
    if (request.method !== "POST" || request.url !== "/event") return answer(response, 404, `${request.method} ${request.url}`);
    if (!bearerMatches(request.headers.authorization, options.token)) return answer(response, 401, "missing or wrong bearer token");
    const body = await readBody(request);
    if (body === undefined) return answer(response, 413, "body too large");
    let parsed: ReturnType<typeof SinkEnvelope.safeParse>;
    try {
      parsed = SinkEnvelope.safeParse(JSON.parse(body));
    } catch {
      return answer(response, 400, "body is not JSON");
    }
    if (!parsed.success) return answer(response, 400, formatIssues(parsed.error));
    events.push(parsed.data);
    bodies.push(body);
    options.onEvent?.(parsed.data);
    for (const wake of waiters) wake();
    answer(response, 204);
  });
  server.on("connection", () => connections++);

  // A socket file left by a crashed app would make listen fail with EADDRINUSE.
  rmSync(options.socket, { force: true });
  await new Promise<void>((resolveListen, rejectListen) => {
    server.once("error", rejectListen);
    server.listen(options.socket, () => {
      server.off("error", rejectListen);
      // Only this user may connect, as a real app should do too; the token is the second lock.
      if (process.platform !== "win32") chmodSync(options.socket, 0o600);
      resolveListen();
    });
  });

  return {
    events,
    bodies,
    rejected,
    get connections() {
      return connections;
    },
    waitFor(done) {
      return new Promise((resolveWait) => {
        const check = () => {
          if (!done(events)) return;
          waiters.delete(check);
          resolveWait(events);
        };
        waiters.add(check);
        check();
      });
    },
    async close() {
      for (const timer of timers) clearTimeout(timer);
      server.closeAllConnections();
      await new Promise<void>((resolveClose) => server.close(() => resolveClose()));
    },
  };
}
