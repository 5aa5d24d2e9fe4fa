/** Pairing codes: single use, short-lived, kept only as digests; redeeming is rate-limited per address and in all. */
import { createHash, randomInt } from "node:crypto";
import { normalisePairingCode, PAIRING_ALPHABET, PAIRING_CODE_CHARS, PAIRING_TTL_MS } from "../../protocol/pairing.ts";
import { fullBucket, KeyedBuckets, takeFromAll, type Bucket, type RateLimit } from "../rate-limit-rules.ts";

export const PAIRING_LIMIT_PER_ADDRESS: RateLimit = { perMinute: 10, burst: 5 };
export const PAIRING_LIMIT_TOTAL: RateLimit = { perMinute: 30, burst: 20 };
/** Codes outstanding at most: an instance issues one per start, so this is only a bound. */
const MAX_CODES = 16;

/** A fresh code from the unambiguous alphabet, drawn without bias. */
export function newPairingCode(): string {
  return Array.from({ length: PAIRING_CODE_CHARS }, () => PAIRING_ALPHABET[randomInt(PAIRING_ALPHABET.length)]).join("");
}

const digest = (code: string) => createHash("sha256").update(normalisePairingCode(code), "utf8").digest("hex");

export type Redemption = { ok: true } | { ok: false; why: "invalid" } | { ok: false; why: "rate_limited"; retryAfterSeconds: number };

export class PairingCodes {
  /** Digest → when it expires (ms). */
  readonly #codes = new Map<string, number>();
  readonly #perAddress = new KeyedBuckets(PAIRING_LIMIT_PER_ADDRESS);
  #total: Bucket | undefined;
  readonly #now: () => number;

  constructor(now: () => number = Date.now) {
    this.#now = now;
  }

  /** Keeps `code` (or a new one) until it is redeemed or expires; returns it. */
  issue(code: string = newPairingCode()): string {
    this.#forgetExpired();
    if (this.#codes.size >= MAX_CODES) this.#codes.delete(this.#codes.keys().next().value!);
    this.#codes.set(digest(code), this.#now() + PAIRING_TTL_MS);
    return code;
  }

  /** One attempt from `address`: a known, unexpired code is used up; anything else is one answer. */
  redeem(code: string, address: string): Redemption {
    const now = this.#now();
    this.#perAddress.prune(now);
    const buckets = [
      { bucket: this.#perAddress.get(address, now), limit: PAIRING_LIMIT_PER_ADDRESS },
      { bucket: this.#total ?? fullBucket(PAIRING_LIMIT_TOTAL, now), limit: PAIRING_LIMIT_TOTAL },
    ];
    const take = takeFromAll(buckets, now);
    this.#perAddress.set(address, take.buckets[0]!);
    this.#total = take.buckets[1]!;
    if (!take.allowed) return { ok: false, why: "rate_limited", retryAfterSeconds: take.retryAfterSeconds };
    this.#forgetExpired();
    const key = digest(code);
    if (!this.#codes.has(key)) return { ok: false, why: "invalid" };
    this.#codes.delete(key);
    return { ok: true };
  }

  #forgetExpired(): void {
    const now = this.#now();
    for (const [key, expires] of this.#codes) if (expires <= now) this.#codes.delete(key);
  }
}
