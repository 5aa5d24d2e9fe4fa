/** The notify-only Feishu custom bot: one signed text message per push, within the bot's rate and size limits. */
import { createHmac } from "node:crypto";
import { fullBucket, takeFromAll, type Bucket, type RateLimit } from "../rate-limit-rules.ts";
import { postJson, type PublishOutcome } from "./ntfy.ts";
import type { PushMessage } from "./render-rules.ts";

/** The bot's webhook, `https://open.feishu.cn/open-apis/bot/v2/hook/<token>` (the URL is a credential), and its signing secret (empty when the bot
 * does not check signatures). */
export type FeishuTarget = { url: string; secret: string };

/** The custom bot's limits per bot: 5 a second and 100 a minute; a request body at most 20 KB. */
export const FEISHU_LIMITS: readonly RateLimit[] = [
  { perMinute: 300, burst: 5 },
  { perMinute: 100, burst: 100 },
];
export const FEISHU_BODY_BYTES = 20 * 1024;
const RATE_LIMITED_CODE = 11232;

export function feishuSign(timestamp: number, secret: string): string {
  return createHmac("sha256", `${timestamp}\n${secret}`).update("").digest("base64");
}

/** One sender per bot: it keeps the bot's buckets, so a burst waits instead of being refused. */
export class FeishuSender {
  readonly #target: FeishuTarget;
  readonly #now: () => number;
  #buckets: Bucket[];

  constructor(target: FeishuTarget, now: () => number = Date.now) {
    this.#target = target;
    this.#now = now;
    this.#buckets = FEISHU_LIMITS.map((limit) => fullBucket(limit, now()));
  }

  async send(message: PushMessage): Promise<PublishOutcome> {
    const nowMs = this.#now();
    const take = takeFromAll(
      this.#buckets.map((bucket, i) => ({ bucket, limit: FEISHU_LIMITS[i]! })),
      nowMs,
    );
    this.#buckets = take.buckets;
    if (!take.allowed) return { kind: "retry", code: "feishu_rate_limited", detail: "5/s, 100/min", retryAfterMs: take.retryAfterSeconds * 1000 };
    const body = JSON.stringify(this.#body(message, Math.floor(nowMs / 1000)));
    if (Buffer.byteLength(body) > FEISHU_BODY_BYTES) return { kind: "refused", code: "feishu_refused", detail: "over 20 KB" };
    return postJson("feishu", this.#target.url, { body }, this.#now, async (response) => {
      const answer = (await response.json().catch(() => null)) as { code?: unknown; StatusCode?: unknown; msg?: unknown } | null;
      const code = answer?.code ?? answer?.StatusCode;
      if (response.ok && code === 0) return { messageId: null };
      const detail = `HTTP ${response.status}${typeof code === "number" ? ` code ${code}` : ""}${typeof answer?.msg === "string" ? ` ${answer.msg.replace(/\s+/g, " ").slice(0, 200)}` : ""}`;
      const retryAfter = response.headers.get("retry-after") ?? response.headers.get("x-ogw-ratelimit-reset");
      return { detail, rateLimited: response.status === 429 || code === RATE_LIMITED_CODE, retryAfter };
    });
  }

  /** A plain text message: the push's title and text; `<` is shown full-width, so no `<at user_id="all">` in an agent's words can mention anyone. */
  #body(message: PushMessage, timestamp: number) {
    const content = { text: `${message.title}\n${message.message}`.replace(/</g, "＜") };
    const signed = this.#target.secret ? { timestamp: String(timestamp), sign: feishuSign(timestamp, this.#target.secret) } : {};
    return { ...signed, msg_type: "text", content };
  }
}
