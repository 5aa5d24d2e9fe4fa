/** Online hosts from their heartbeats, in memory on the sessions' TTL. */
import type { HostHeartbeat } from "../../protocol/hosts.ts";
import { DomainError } from "../../common/domain-error.ts";

interface HostEntry {
  heartbeat: HostHeartbeat;
  lastSeenMs: number;
}

export class HostRegistry {
  readonly ttlMs: number;
  readonly #now: () => number;
  readonly #entries = new Map<string, HostEntry>();

  constructor(ttlMs: number, now: () => number = Date.now) {
    this.ttlMs = ttlMs;
    this.#now = now;
  }

  /** A host id belongs to its runtime until that runtime's heartbeats expire (as for sessions). */
  record(heartbeat: HostHeartbeat): void {
    const current = this.#entries.get(heartbeat.host_id);
    if (current && current.heartbeat.runtime_id !== heartbeat.runtime_id && this.#live(current)) {
      throw new DomainError("session_in_use", { retryAfterSeconds: (current.lastSeenMs + this.ttlMs - this.#now()) / 1000 });
    }
    this.#entries.set(heartbeat.host_id, { heartbeat, lastSeenMs: this.#now() });
  }

  /** Only the registered runtime signs its host off; an old runtime's goodbye is ignored. */
  remove(hostId: string, runtimeId: string): boolean {
    return this.#entries.get(hostId)?.heartbeat.runtime_id === runtimeId && this.#entries.delete(hostId);
  }

  isLiveRuntime(hostId: string, runtimeId: string): boolean {
    const entry = this.#entries.get(hostId);
    return entry !== undefined && entry.heartbeat.runtime_id === runtimeId && this.#live(entry);
  }

  online(): HostHeartbeat[] {
    const live: HostHeartbeat[] = [];
    for (const [id, entry] of this.#entries) {
      if (this.#live(entry)) live.push(entry.heartbeat);
      else this.#entries.delete(id);
    }
    return live;
  }

  #live(entry: HostEntry): boolean {
    return this.#now() - entry.lastSeenMs < this.ttlMs;
  }
}
