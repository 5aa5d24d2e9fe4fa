/** The HTTP edge every route shares: constant-time bearer check, 503 until loaded, our own size-limited
 * body reading and protocol-shaped JSON errors (`Symbol.for('noParseBody')` skips plugin-server's parser). */
import { createHash, timingSafeEqual } from "node:crypto";
import type { IncomingMessage } from "node:http";
import type { Context } from "koishi";
import type {} from "@koishijs/plugin-server";
import type { Context as KoaContext } from "koa";
import { errorText } from "../../common/errors.ts";
import { API_BASE_PATH, LIMITS, isStorableText, nestsDeeperThan, NOT_STORABLE } from "../../protocol/wire.ts";
import { DomainError } from "../../common/domain-error.ts";
import { AUTH_FAILURE_LIMIT, AuthFailures } from "./auth-failures.ts";
import { errorAnswer, HTTP_STATUS, json, type JsonAnswer } from "./error-status.ts";
import { trustConnection } from "./trust.ts";
import { instanceText } from "../locales/load.ts";

export { json, type JsonAnswer } from "./error-status.ts";

/** `capability`: no bearer token, the URL itself is the credential (the push's answer buttons); `pairing`: the body's pairing code is the credential
 * (server/pairing/); `signed`: the handler checks the raw body's signature before parsing it (triggers). */
export type RouteAuth = "agent" | "operator" | "capability" | "pairing" | "signed";
export type RouteMethod = "GET" | "POST" | "PUT" | "DELETE";

export interface RouteSpec {
  method: RouteMethod;
  /** Relative to the API base path, in @koa/router syntax: `/events/:event_id`. */
  path: string;
  auth: RouteAuth;
  /** Largest accepted body in bytes; bodies are read for every method but GET. */
  maxBytes?: number;
  /** The body is read (within `maxBytes`) but not parsed: whatever a caller sends means nothing here. */
  anyBody?: boolean;
}

export interface RouteRequest {
  params: Readonly<Record<string, string>>;
  query: URLSearchParams;
  header(name: string): string | undefined;
  /** The parsed JSON body; `undefined` for GET and for `signed` routes. */
  body: unknown;
  /** The body's bytes as they arrived (empty for GET). */
  raw: Buffer;
  /** Aborted when the client goes away (for long polls). */
  signal: AbortSignal;
  /** The peer's address (behind a reverse proxy: the proxy's). */
  remoteAddress: string;
}

export type RouteHandler = (request: RouteRequest) => Promise<JsonAnswer> | JsonAnswer;

/** Runs around every authenticated operator request and must call `run` once (the audit trail records each one here). */
export type OperatorRequestHook = (spec: RouteSpec, request: RouteRequest, run: () => Promise<JsonAnswer>) => Promise<JsonAnswer>;

/** `operatorToken` empty: the operator API is off; `bodyTimeoutMs`: how long a body may take to arrive (a slower one loses its connection);
 * `onFailureBurst`: told once per burst of wrong tokens from one address (the burst's later failures get 429). */
type HttpAccess = { agentToken: string; operatorToken: string; bodyTimeoutMs?: number; onFailureBurst?: (address: string) => void };

/** One per plugin instance: parts register routes through `route` and may hold the whole API at 503 until their durable state is loaded. */
export class HttpApi {
  readonly #agentDigest: Buffer;
  readonly #operatorDigest: Buffer | null;
  readonly #bodyTimeoutMs: number;
  readonly #holds = new Set<symbol>();
  readonly #capabilities = new Map<symbol, string>();
  readonly #failures: AuthFailures;
  #operatorHook: OperatorRequestHook | undefined;

  constructor(access: HttpAccess) {
    this.#agentDigest = digest(access.agentToken);
    this.#operatorDigest = access.operatorToken ? digest(access.operatorToken) : null;
    this.#bodyTimeoutMs = access.bodyTimeoutMs ?? 30_000;
    this.#failures = new AuthFailures(AUTH_FAILURE_LIMIT, access.onFailureBurst ?? (() => {}));
  }

  /** Answers 503 until the returned function is called or `ctx` is disposed. */
  holdUntilReady(ctx: Context): () => void {
    const hold = Symbol();
    this.#holds.add(hold);
    const release = () => void this.#holds.delete(hold);
    ctx.on("dispose", release);
    return release;
  }

  /** What the loaded parts offer, for /health; withdrawn when `ctx` is disposed. */
  offer(ctx: Context, capability: string): void {
    const key = Symbol();
    this.#capabilities.set(key, capability);
    ctx.on("dispose", () => void this.#capabilities.delete(key));
  }

  get capabilities(): string[] {
    return [...new Set(this.#capabilities.values())].sort();
  }

  route(ctx: Context, spec: RouteSpec, handler: RouteHandler): void {
    const logger = ctx.logger("notify-webhook");
    const middleware = async (c: KoaContext) => {
      let answer: JsonAnswer;
      try {
        answer = await this.#answer(c, spec, handler);
      } catch (error) {
        if (error instanceof BodyCutOff) return; // the connection is gone: nobody to answer
        if (error instanceof DomainError) {
          answer = errorAnswer(error);
          // The rest of the body is never read (too large, or from a stranger), so the connection is closed after the answer.
          if (error.code === "payload_too_large" || error.code === "unauthorized" || error instanceof Unauthorized) c.set("Connection", "close");
        } else {
          logger.error(instanceText(ctx, "anon-notify.log.route-failed", { method: spec.method, path: spec.path, error: errorText(error) }));
          answer = json(500, { error: "internal_error" });
        }
      }
      write(c, answer);
      logger.debug("%s %s → %d", spec.method, spec.path, answer.status);
    };
    ctx.server[spec.method.toLowerCase() as Lowercase<RouteMethod>](API_BASE_PATH + spec.path, unparsed(middleware));
  }

  /** While `missing()` names any service, every API request is answered here (401 without a valid token, else 503 `service_missing`) before the routes,
   * never reading the body. */
  refuseWhileMissing(ctx: Context, missing: () => string[], onRefused: (names: string[]) => void): void {
    const middleware = async (c: KoaContext, next: () => Promise<unknown>) => {
      const names = missing();
      if (names.length === 0) return next();
      let answer: JsonAnswer;
      try {
        this.#authorize(c, "any");
        onRefused(names);
        answer = json(HTTP_STATUS.service_missing, { error: "service_missing", missing: names });
      } catch (error) {
        if (!(error instanceof DomainError)) throw error;
        answer = errorAnswer(error);
      }
      write(c, answer);
      // The body is never read here, so the connection is not reused.
      c.set("Connection", "close");
    };
    ctx.server.all(`${API_BASE_PATH}/(.*)`, unparsed(middleware));
  }

  async #answer(c: KoaContext, spec: RouteSpec, handler: RouteHandler): Promise<JsonAnswer> {
    this.#authorize(c, spec.auth);
    if (this.#holds.size > 0) throw new DomainError("not_ready", { retryAfterSeconds: 1 });
    const raw = spec.method === "GET" ? undefined : await readBody(c, spec.maxBytes ?? LIMITS.eventBodyBytes, this.#bodyTimeoutMs);
    const body = raw === undefined || spec.anyBody || spec.auth === "signed" ? undefined : parseJson(raw);
    const params = (c as KoaContext & { params?: Record<string, string> }).params ?? {};
    const query = new URLSearchParams(c.querystring);
    refuseUnstorable(params, query);
    const abort = new AbortController();
    const onClose = () => {
      if (!c.res.writableEnded) abort.abort();
    };
    c.res.once("close", onClose);
    try {
      const request: RouteRequest = {
        params,
        query,
        header: (name) => c.get(name) || undefined,
        body,
        raw: raw ?? Buffer.alloc(0),
        signal: abort.signal,
        remoteAddress: c.req.socket.remoteAddress ?? "",
      };
      const hook = spec.auth === "operator" ? this.#operatorHook : undefined;
      return hook ? await hook(spec, request, async () => handler(request)) : await handler(request);
    } finally {
      c.res.off("close", onClose);
    }
  }

  aroundOperatorRequests(hook: OperatorRequestHook): void {
    this.#operatorHook = hook;
  }

  /** `any`: either token (the 503 guard). */
  #authorize(c: KoaContext, auth: RouteAuth | "any"): void {
    if (auth === "capability" || auth === "pairing" || auth === "signed") return;
    if (auth === "operator" && !this.#operatorDigest) throw new DomainError("operator_disabled");
    const header = c.get("authorization");
    const agent = auth !== "operator" && presents(header, this.#agentDigest);
    const operator = auth !== "agent" && this.#operatorDigest !== null && presents(header, this.#operatorDigest);
    if (!agent && !operator) this.#refuse(c.req);
    trustConnection(c.req.socket);
  }

  /** A wrong or missing token: 401, or 429 once this address has failed a burst of times. */
  #refuse(request: IncomingMessage): never {
    const retryAfterSeconds = this.#failures.record(request.socket.remoteAddress ?? "");
    if (retryAfterSeconds === null) throw new DomainError("unauthorized");
    throw new Unauthorized("rate_limited", { retryAfterSeconds });
  }
}

/** Compares digests, so neither the content nor the length of the token leaks through timing. */
function presents(header: string, expected: Buffer): boolean {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  const presented = digest(match?.[1] ?? "");
  return timingSafeEqual(presented, expected) && match !== null;
}

/** plugin-server's own parser answers bad JSON with a text/plain 400 and a stack trace, its limit a fixed 10 MB: skipped. */
function unparsed<T extends object>(middleware: T): T {
  return Object.defineProperty(middleware, Symbol.for("noParseBody"), { value: true });
}

function write(c: KoaContext, answer: JsonAnswer): void {
  c.status = answer.status;
  for (const [name, value] of Object.entries(answer.headers ?? {})) c.set(name, value);
  c.type = "application/json";
  c.body = JSON.stringify(answer.body);
}

function digest(token: string): Buffer {
  return createHash("sha256").update(token, "utf8").digest();
}

/** A refusal for a wrong token that is not a 401 (a throttled address): its body is never read either. */
class Unauthorized extends DomainError {}

/** A body that missed its deadline, or whose connection closed first (a client gone, npm start stopping): nobody to answer. */
class BodyCutOff extends Error {}

/** Reads at most `maxBytes` within `timeoutMs`; a body still trickling in after that loses its connection. */
async function readBody(c: KoaContext, maxBytes: number, timeoutMs: number): Promise<Buffer> {
  const declared = Number(c.get("content-length") || 0);
  if (declared > maxBytes) throw new DomainError("payload_too_large");
  const chunks: Buffer[] = [];
  let total = 0;
  let cutOff = false;
  const socket = c.req.socket;
  const deadline = setTimeout(() => {
    cutOff = true;
    socket.destroy();
  }, timeoutMs);
  try {
    for await (const chunk of c.req as AsyncIterable<Buffer>) {
      total += chunk.length;
      if (total > maxBytes) throw new DomainError("payload_too_large");
      chunks.push(chunk);
    }
  } catch (error) {
    throw cutOff || socket.destroyed ? new BodyCutOff() : error;
  } finally {
    clearTimeout(deadline);
  }
  return Buffer.concat(chunks, total);
}

/** Fatal: a body that is not UTF-8 is refused, never rewritten with U+FFFD. The BOM is kept, so JSON.parse refuses it as before. */
const UTF8 = new TextDecoder("utf-8", { fatal: true, ignoreBOM: true });

/** A request body or stream frame as JSON: UTF-8 only, no deeper than the wire allows; refusals are DomainErrors. */
export function parseJson(raw: Buffer): unknown {
  let text: string;
  try {
    text = UTF8.decode(raw);
  } catch {
    throw new DomainError("invalid_request", { issues: [{ path: "", message: "the body is not valid UTF-8" }] });
  }
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw new DomainError("invalid_json");
  }
  // The parser itself takes any depth, but every recursive step after it (validation, hashing, rendering) would not.
  if (nestsDeeperThan(value, LIMITS.jsonDepth)) {
    throw new DomainError("invalid_request", { issues: [{ path: "", message: `nested deeper than ${LIMITS.jsonDepth} levels` }] });
  }
  return value;
}

/** Path and query values are ids, keys and numbers: one that could not be stored or logged as it is gets 400 here. */
function refuseUnstorable(params: Readonly<Record<string, string>>, query: URLSearchParams): void {
  const issues = [...Object.entries(params), ...query]
    .filter(([name, value]) => !isStorableText(name) || !isStorableText(value))
    .map(([name]) => ({ path: isStorableText(name) ? name : "(query)", message: NOT_STORABLE }));
  if (issues.length > 0) throw new DomainError("invalid_request", { issues });
}
