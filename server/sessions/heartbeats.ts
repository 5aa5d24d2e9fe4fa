/** The heartbeat service: validation, the three rate limits (session, runtime, the whole token) and the
 * answer; refusals are DomainErrors. */
import { Heartbeat, type HeartbeatAnswer } from "../../protocol/sessions.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { SessionBuckets, type RateLimit } from "../rate-limit-rules.ts";
import type { SessionRegistry } from "./registry.ts";

/** `limit`: of one session, and likewise of one runtime; `totalLimit`: of the agent token, all sessions together (far above normal use). */
export type HeartbeatLimits = { limit: RateLimit; totalLimit: RateLimit };

export class HeartbeatService {
  readonly #registry: SessionRegistry;
  readonly #now: () => number;
  // One session's flood (or a Pi in a reload loop) uses up its own buckets, not the others'.
  readonly #buckets: SessionBuckets;

  constructor(registry: SessionRegistry, limits: HeartbeatLimits, now: () => number = Date.now) {
    this.#registry = registry;
    this.#now = now;
    this.#buckets = new SessionBuckets(limits.limit, limits.totalLimit, now());
  }

  /** Validates `body` (before the limits: a bad body costs nothing), takes from every bucket, records it. */
  receive(body: unknown): HeartbeatAnswer {
    const heartbeat = parseWith(Heartbeat, body);
    const now = this.#now();
    const take = this.#buckets.take(heartbeat.session_id, heartbeat.runtime_id, now);
    if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
    this.#registry.record(heartbeat);
    return { ttl_ms: this.#registry.ttlMs, server_time: new Date(now).toISOString(), command_protocol: PROTOCOL_VERSIONS.commands };
  }

  prune(): void {
    this.#buckets.prune(this.#now());
  }
}
