/** The HTTP client for the server (undici, one kept-alive Agent): bearer, Idempotency-Key, timeouts, answers validated; every failure a ServerError. */
import { Agent, request as undiciRequest } from "undici";
import type { z } from "zod";
import { errorText } from "../../common/errors.ts";
import { BatchAccepted, EventAccepted, type EventBody } from "../../protocol/events.ts";
import { batchOutcomes, type EventOutcome, receiptFailed } from "../notices/batch.ts";
import type { Link } from "./link.ts";
import { endpointUrl, ErrorAnswer, formatIssues } from "../../protocol/wire.ts";
import { aborted, classifyHttpFailure, ServerError } from "./retry.ts";

export interface RequestOptions<T> {
  body?: unknown;
  query?: Record<string, string | number | undefined>;
  timeoutMs?: number;
  schema: z.ZodType<T>;
  signal?: AbortSignal;
  headers?: Record<string, string>;
}

export interface WebhookClientOptions {
  endpoint: string;
  token: string | undefined;
  timeoutMs: number;
  now?: () => number;
  /** Called when the server starts refusing the token (a 401 after none or after a success), not on every 401. */
  onTokenRejected?: () => void;
  /** Hears whether each request found the server (not requests this side aborted). */
  link?: Pick<Link, "signal" | "quiet">;
}

// Node and undici codes for a connection that failed or broke; trying again may work.
const NETWORK_CODES = new Set([
  ..."ECONNREFUSED ECONNRESET EPIPE ETIMEDOUT EHOSTUNREACH ENETUNREACH ENOTFOUND EAI_AGAIN".split(" "),
  ..."UND_ERR_SOCKET UND_ERR_CLOSED UND_ERR_CONNECT_TIMEOUT UND_ERR_HEADERS_TIMEOUT UND_ERR_BODY_TIMEOUT".split(" "),
]);

function networkCode(error: unknown): string | undefined {
  let current: unknown = error;
  // undici wraps the socket error; the useful code may sit one cause down.
  for (let depth = 0; depth < 3 && current instanceof Error; depth += 1) {
    const code = (current as NodeJS.ErrnoException).code;
    if (code) return code;
    current = current.cause;
  }
  return undefined;
}

export function createWebhookClient(options: WebhookClientOptions) {
  const now = options.now ?? Date.now;
  // One kept-alive pool for all calls: heartbeats and events reuse the same connection.
  const agent = new Agent({ keepAliveTimeout: 30_000, keepAliveMaxTimeout: 60_000 });
  let rejected = false;
  // The link decides what a failure says about the server: an answer with a refusal is still an answer.
  const failed = (error: ServerError): ServerError => {
    options.link?.signal({ kind: "failed", error });
    error.quiet = options.link?.quiet(error) ?? false;
    return error;
  };

  /** Any API call under the endpoint's base path; throws a ServerError on every failure. */
  async function request<T>(method: "GET" | "POST", path: string, opts: RequestOptions<T>): Promise<T> {
    const url = new URL(endpointUrl(options.endpoint, path));
    for (const [key, value] of Object.entries(opts.query ?? {})) if (value !== undefined) url.searchParams.set(key, String(value));
    const timeoutMs = opts.timeoutMs ?? options.timeoutMs;
    const timeout = AbortSignal.timeout(timeoutMs);
    const signal = opts.signal ? AbortSignal.any([timeout, opts.signal]) : timeout;
    const headers: Record<string, string> = { accept: "application/json", ...opts.headers };
    if (options.token) headers.authorization = `Bearer ${options.token}`;
    if (opts.body !== undefined) headers["content-type"] = "application/json";

    let response: Awaited<ReturnType<typeof undiciRequest>>;
    let text: string;
    try {
      response = await undiciRequest(url, {
        dispatcher: agent,
        method,
        headers,
        body: opts.body === undefined ? null : JSON.stringify(opts.body),
        signal,
      });
      text = await response.body.text();
    } catch (error) {
      if (opts.signal?.aborted) throw aborted();
      throw failed(unanswered(error, `${method} ${path}`, timeout.aborted ? timeoutMs : undefined, options.token));
    }

    const json = parsedJson(text);
    if (response.statusCode === 401 && !rejected) {
      rejected = true;
      options.onTokenRejected?.();
    } else if (response.statusCode >= 200 && response.statusCode <= 299) rejected = false;
    if (response.statusCode < 200 || response.statusCode > 299) {
      const serverError = ErrorAnswer.safeParse(json);
      throw failed(classifyHttpFailure(response.statusCode, response.headers, now(), serverError.success ? serverError.data.error : undefined));
    }
    options.link?.signal({ kind: "answered" });
    return validAnswer(opts.schema, json, response.statusCode);
  }

  return {
    request,
    /** One POST /events; resolves only when the server accepted it with a receipt state other than `failed`. */
    postEvent: (event: EventBody, signal?: AbortSignal): Promise<EventAccepted> => postEvent(request, event, signal),
    /** One POST /events/batch: the outcome of each event the server looked at, in order (a prefix of `events`); throws when the request as a whole failed. */
    async postEvents(events: EventBody[], signal?: AbortSignal): Promise<EventOutcome[]> {
      const answer = await request("POST", "events/batch", { body: { events }, schema: BatchAccepted, ...(signal ? { signal } : {}) });
      return batchOutcomes(events, answer, now());
    },
    /** Drops the kept-alive connections and aborts anything still in flight. */
    async close() {
      await agent.destroy();
    },
  };
}

/** Why a request got no answer: its timeout ran out, or the connection failed (retryable for the codes above). */
function unanswered(error: unknown, request: string, timedOutMs: number | undefined, token: string | undefined): ServerError {
  if (timedOutMs !== undefined) {
    return new ServerError(`no answer within ${timedOutMs} ms`, { retryable: true, code: "timeout", facts: { kind: "timeout", ms: timedOutMs } });
  }
  const code = networkCode(error);
  const message = token ? errorText(error).split(token).join("[token]") : errorText(error);
  return new ServerError(`${request} failed: ${code ?? "error"} ${message}`.trim(), {
    retryable: code !== undefined && NETWORK_CODES.has(code),
    code: code ?? "network",
    facts: { kind: "network", request, code: code ?? null, detail: message },
  });
}

function parsedJson(text: string): unknown {
  try {
    return text === "" ? undefined : JSON.parse(text);
  } catch {
    return undefined;
  }
}

function validAnswer<T>(schema: z.ZodType<T>, json: unknown, status: number): T {
  const answer = schema.safeParse(json);
  if (answer.success) return answer.data;
  throw new ServerError(`HTTP ${status} with an invalid answer: ${formatIssues(answer.error, "(body)")}`, {
    retryable: false,
    status,
    code: "invalid_answer",
    facts: { kind: "invalid_answer", status, where: answer.error.issues.map((issue) => issue.path.join(".") || "(body)").join(", ") },
  });
}

export type WebhookClient = ReturnType<typeof createWebhookClient>;

async function postEvent(request: WebhookClient["request"], event: EventBody, signal?: AbortSignal): Promise<EventAccepted> {
  const accepted = await request("POST", "events", {
    body: event,
    schema: EventAccepted,
    headers: { "idempotency-key": event.event_id },
    ...(signal ? { signal } : {}),
  });
  if (accepted.event_id !== event.event_id) {
    throw new ServerError(`answer names event ${accepted.event_id}, not ${event.event_id}`, {
      retryable: false,
      code: "invalid_answer",
      facts: { kind: "wrong_event", named: accepted.event_id, sent: event.event_id },
    });
  }
  if (accepted.state === "failed") throw receiptFailed();
  return accepted;
}
/** The slice of the client that presence, the command channel and the progress tool use. */
export type ApiClient = Pick<WebhookClient, "request">;
