/** The heartbeat service: validation, the three rate limits (session, runtime, the whole token) and the
 * answer; refusals are DomainErrors. */
import { Heartbeat, type HeartbeatAnswer } from "../../protocol/sessions.ts";
import { PROTOCOL_VERSIONS } from "../../protocol/wire.ts";
import { DomainError, parseWith } from "../../common/domain-error.ts";
import { KeyedBuckets, fullBucket, takeFromAll, type Bucket, type RateLimit } from "../rate-limit-rules.ts";
import type { SessionRegistry } from "./registry.ts";

export interface HeartbeatLimits {
  /** Heartbeats of one session, and likewise of one runtime. */
  limit: RateLimit;
  /** Heartbeats of the one agent token, all sessions together: a ceiling far above normal use. */
  totalLimit: RateLimit;
}

export class HeartbeatService {
  readonly #registry: SessionRegistry;
  readonly #limits: HeartbeatLimits;
  readonly #now: () => number;
  // One session's flood (or a Pi in a reload loop) uses up its own buckets, not the others'.
  readonly #bySession: KeyedBuckets;
  readonly #byRuntime: KeyedBuckets;
  #total: Bucket;

  constructor(registry: SessionRegistry, limits: HeartbeatLimits, now: () => number = Date.now) {
    this.#registry = registry;
    this.#limits = limits;
    this.#now = now;
    this.#bySession = new KeyedBuckets(limits.limit);
    this.#byRuntime = new KeyedBuckets(limits.limit);
    this.#total = fullBucket(limits.totalLimit, now());
  }

  /** Validates `body` (before the limits: a bad body costs nothing), takes from every bucket, records it. */
  receive(body: unknown): HeartbeatAnswer {
    const heartbeat = parseWith(Heartbeat, body);
    const now = this.#now();
    const { limit, totalLimit } = this.#limits;
    const take = takeFromAll(
      [
        { bucket: this.#bySession.get(heartbeat.session_id, now), limit },
        { bucket: this.#byRuntime.get(heartbeat.runtime_id, now), limit },
        { bucket: this.#total, limit: totalLimit },
      ],
      now,
    );
    const [session, runtime, all] = take.buckets as [Bucket, Bucket, Bucket];
    this.#bySession.set(heartbeat.session_id, session);
    this.#byRuntime.set(heartbeat.runtime_id, runtime);
    this.#total = all;
    if (!take.allowed) throw new DomainError("rate_limited", { retryAfterSeconds: take.retryAfterSeconds });
    this.#registry.record(heartbeat);
    return { ttl_ms: this.#registry.ttlMs, server_time: new Date(now).toISOString(), command_protocol: PROTOCOL_VERSIONS.commands };
  }

  /** Forgets buckets that have refilled (they hold nothing worth keeping). */
  prune(): void {
    const now = this.#now();
    this.#bySession.prune(now);
    this.#byRuntime.prune(now);
  }
}
