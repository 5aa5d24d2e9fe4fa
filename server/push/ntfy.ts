/** One publish to ntfy's JSON API and what its answer comes to: delivered, worth retrying, or refused. */
import { errorText } from "../../common/errors.ts";
import { retryAfterDelayMs } from "../../common/backoff.ts";
import type { Say } from "../locales/load.ts";
import type { PushMessage } from "./render-rules.ts";

export interface NtfyTarget {
  /** The ntfy server's base URL, e.g. `https://ntfy.sh` or `https://push.example.com/ntfy`. */
  url: string;
  topic: string;
  /** Sent as `Authorization: Bearer`; empty for an open topic. */
  token: string;
}

export type { PushRoute } from "../../protocol/push.ts";
export type PushErrorCode =
  | "ntfy_rate_limited"
  | "ntfy_unavailable"
  | "ntfy_refused"
  | "feishu_rate_limited"
  | "feishu_unavailable"
  | "feishu_refused"
  | "approval_ended";

export type PublishOutcome =
  | { kind: "delivered"; messageId: string | null }
  /** `retryAfterMs`: what the answer asked for (a `Retry-After`); absent, the caller backs off. */
  | { kind: "retry"; code: PushErrorCode; detail: string; retryAfterMs?: number }
  | { kind: "refused"; code: PushErrorCode; detail: string };

const PUBLISH_TIMEOUT_MS = 15_000;

/** The JSON publish endpoint: the base URL's root, keeping a path prefix (`/ntfy/`). */
export function publishUrl(base: string): string {
  const url = new URL(base);
  if (!url.pathname.endsWith("/")) url.pathname += "/";
  return url.toString();
}

export async function publish(target: NtfyTarget, message: PushMessage, now: () => number = Date.now): Promise<PublishOutcome> {
  const headers: Record<string, string> = { "content-type": "application/json" };
  if (target.token) headers.authorization = `Bearer ${target.token}`;
  let response: Response;
  try {
    response = await fetch(publishUrl(target.url), {
      method: "POST",
      headers,
      body: JSON.stringify({ topic: target.topic, ...message }),
      signal: AbortSignal.timeout(PUBLISH_TIMEOUT_MS),
      redirect: "error",
    });
  } catch (error) {
    return { kind: "retry", code: "ntfy_unavailable", detail: errorText(error).slice(0, 200) };
  }
  const text = await response.text().catch(() => "");
  if (response.ok) return { kind: "delivered", messageId: messageIdOf(text) };
  const detail = `HTTP ${response.status}${ntfyError(text) ? ` ${ntfyError(text)}` : ""}`;
  if (response.status === 429) {
    const retryAfterMs = retryAfterDelayMs(response.headers.get("retry-after"), now());
    return { kind: "retry", code: "ntfy_rate_limited", detail, ...(retryAfterMs === undefined ? {} : { retryAfterMs }) };
  }
  if (response.status >= 500 || response.status === 408) return { kind: "retry", code: "ntfy_unavailable", detail };
  return { kind: "refused", code: "ntfy_refused", detail };
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
