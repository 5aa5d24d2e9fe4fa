/** One publish to ntfy's JSON API and what its answer comes to: delivered, worth retrying, or refused. */
import { errorText } from "../../common/errors.ts";
import { retryAfterDelayMs } from "../../common/backoff.ts";
import type { Say } from "../locales/load.ts";
import type { PushMessage } from "./render-rules.ts";
import type { PushRoute } from "../../protocol/push.ts";

/** `url`: the ntfy server's base URL, e.g. `https://ntfy.sh` or `https://push.example.com/ntfy`; `token`: sent as `Authorization: Bearer`, empty
 * for an open topic. */
export type NtfyTarget = { url: string; topic: string; token: string };

export type PushErrorCode = `${PushRoute}_${"rate_limited" | "unavailable" | "refused"}` | "approval_ended";

export type PublishOutcome =
  | { kind: "delivered"; messageId: string | null }
  /** `retryAfterMs`: what the answer asked for (a `Retry-After`); absent, the caller backs off. */
  | { kind: "retry"; code: PushErrorCode; detail: string; retryAfterMs?: number }
  | { kind: "refused"; code: PushErrorCode; detail: string };

const PUBLISH_TIMEOUT_MS = 15_000;

/** What a route reads from its answer: delivered, or the detail shown and whether it asks to slow down (with its `Retry-After`). */
type Read = (response: Response) => Promise<{ messageId: string | null } | { detail: string; rateLimited: boolean; retryAfter: string | null }>;

/** One JSON POST to a push route and what its answer comes to; the route's own answer format is `read`'s. */
export async function postJson(route: PushRoute, url: string, request: RequestInit, now: () => number, read: Read): Promise<PublishOutcome> {
  let response: Response;
  try {
    response = await fetch(url, {
      method: "POST",
      ...request,
      headers: { "content-type": "application/json", ...request.headers },
      signal: AbortSignal.timeout(PUBLISH_TIMEOUT_MS),
      redirect: "error",
    });
  } catch (error) {
    return { kind: "retry", code: `${route}_unavailable`, detail: errorText(error).slice(0, 200) };
  }
  const answer = await read(response);
  if ("messageId" in answer) return { kind: "delivered", messageId: answer.messageId };
  const { detail } = answer;
  if (answer.rateLimited) {
    const retryAfterMs = retryAfterDelayMs(answer.retryAfter, now());
    return { kind: "retry", code: `${route}_rate_limited`, detail, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  }
  if (response.status >= 500 || (route === "ntfy" && response.status === 408)) return { kind: "retry", code: `${route}_unavailable`, detail };
  return { kind: "refused", code: `${route}_refused`, detail };
}

/** The JSON publish endpoint: the base URL's root, keeping a path prefix (`/ntfy/`). */
function publishUrl(base: string): string {
  const url = new URL(base);
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url.toString();
}

export function publish(target: NtfyTarget, message: PushMessage, now: () => number = Date.now): Promise<PublishOutcome> {
  const headers: Record<string, string> = target.token ? { authorization: `Bearer ${target.token}` } : {};
  return postJson("ntfy", publishUrl(target.url), { headers, body: JSON.stringify({ topic: target.topic, ...message }) }, now, async (response) => {
    const text = await response.text().catch(() => "");
    if (response.ok) return { messageId: messageIdOf(text) };
    const detail = `HTTP ${response.status}${ntfyError(text) ? ` ${ntfyError(text)}` : ""}`;
    return { detail, rateLimited: response.status === 429, retryAfter: response.headers.get("retry-after") };
  });
}

/** ntfy answers errors as `{"code","http","error","link"}`; its words, cut, on one line. */
function ntfyError(text: string): string {
  try {
    const error = (JSON.parse(text) as { error?: unknown }).error;
    return typeof error === "string" ? error.replace(/\s+/g, " ").slice(0, 200) : "";
  } catch {
    return "";
  }
}

function messageIdOf(text: string): string | null {
  try {
    const id = (JSON.parse(text) as { id?: unknown }).id;
    return typeof id === "string" ? id : null;
  } catch {
    return null;
  }
}

/** A receipt's error: the code, then the reason in the server's language. Pure. */
export function pushError(say: Say, code: PushErrorCode, detail: string, retryInMs?: number): string {
  const retry = retryInMs === undefined ? "" : say("anon-notify.push.errors.retry-in", [Math.max(1, Math.round(retryInMs / 1000))]);
  return `${code}: ${say(`anon-notify.push.errors.${code}`, [detail])}${retry}`;
}
