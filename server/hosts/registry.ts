/** Online hosts from their heartbeats, in memory on the sessions' TTL. */
import type { HostHeartbeat } from "../../protocol/hosts.ts";
import { LiveRegistry } from "../sessions/registry.ts";

export class HostRegistry extends LiveRegistry<HostHeartbeat> {
  constructor(ttlMs: number, now: () => number = Date.now) {
    super(ttlMs, (heartbeat) => heartbeat.host_id, now);
  }

  online(): HostHeartbeat[] {
    this.sweep();
    return [...this.entries.values()].map((entry) => entry.heartbeat);
  }
}
