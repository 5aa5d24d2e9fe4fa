/** Online sessions from heartbeats, memory only: presence is soft state and live runtimes register again within one heartbeat of a restart. */
import { visibleControls } from "../../common/command-text.ts";
import { shownName } from "../../common/shown-name.ts";
import type { OperatorSessionList } from "../../protocol/operator.ts";
import type { Heartbeat, SessionProjection } from "../../protocol/sessions.ts";
import { DomainError } from "../../common/domain-error.ts";

type Entry<H> = { heartbeat: H; lastSeenMs: number };
export type SessionEntry = Entry<Heartbeat>;

/** `removed`: an offline call; `expired`: heartbeats stopped (found by a sweep). */
type ChangeKind = "recorded" | "removed" | "expired";
type RegistryChange = { kind: ChangeKind; entry: SessionEntry };

/** Heartbeats by key on one TTL (sessions, hosts). A key belongs to the runtime that registered it until offline or expired; another runtime's heartbeat
 * is refused `session_in_use`, so nothing live is taken over silently, and an old runtime's goodbye is ignored. */
export class LiveRegistry<H extends { runtime_id: string }> {
  readonly ttlMs: number;
  readonly #key: (heartbeat: H) => string;
  protected readonly now: () => number;
  protected readonly entries = new Map<string, Entry<H>>();

  constructor(ttlMs: number, key: (heartbeat: H) => string, now: () => number) {
    this.ttlMs = ttlMs;
    this.#key = key;
    this.now = now;
  }

  record(heartbeat: H): void {
    const current = this.entries.get(this.#key(heartbeat));
    if (current && current.heartbeat.runtime_id !== heartbeat.runtime_id && this.isLive(current)) {
      throw new DomainError("session_in_use", { retryAfterSeconds: (current.lastSeenMs + this.ttlMs - this.now()) / 1000 });
    }
    const entry = { heartbeat, lastSeenMs: this.now() };
    this.entries.set(this.#key(heartbeat), entry);
    this.changed("recorded", entry);
  }

  remove(key: string, runtimeId: string): boolean {
    const entry = this.entries.get(key);
    if (!entry || entry.heartbeat.runtime_id !== runtimeId) return false;
    this.entries.delete(key);
    this.changed("removed", entry);
    return true;
  }

  find(key: string): Entry<H> | undefined {
    const entry = this.entries.get(key);
    return entry && this.isLive(entry) ? entry : undefined;
  }

  isLiveRuntime(key: string, runtimeId: string): boolean {
    return this.find(key)?.heartbeat.runtime_id === runtimeId;
  }

  /** Drops expired entries and returns them; lookups never depend on this having run. */
  sweep(): Entry<H>[] {
    const expired: Entry<H>[] = [];
    for (const [key, entry] of this.entries) {
      if (this.isLive(entry)) continue;
      this.entries.delete(key);
      expired.push(entry);
      this.changed("expired", entry);
    }
    return expired;
  }

  protected isLive(entry: Entry<H>): boolean {
    return this.now() - entry.lastSeenMs < this.ttlMs;
  }

  protected changed(_kind: ChangeKind, _entry: Entry<H>): void {}
}

export class SessionRegistry extends LiveRegistry<Heartbeat> {
  private readonly listeners = new Set<(change: RegistryChange) => void>();

  constructor(ttlMs: number, now: () => number = Date.now) {
    super(ttlMs, (heartbeat) => heartbeat.session_id, now);
  }

  /** Follows every change (the watchdog); returns the unsubscribe. */
  onChange(listener: (change: RegistryChange) => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }

  protected override changed(kind: ChangeKind, entry: SessionEntry): void {
    for (const listener of this.listeners) listener({ kind, entry });
  }

  /** The project a live session's heartbeats name, as every surface shows it. */
  projectOf(sessionId: string): string | undefined {
    const entry = this.find(sessionId);
    return entry && projectSession(entry).project;
  }

  /** Live sessions, most recently seen first (then by id, so the order is total for paging). */
  list(): SessionProjection[] {
    return [...this.entries.values()]
      .filter((entry) => this.isLive(entry))
      .sort((a, b) => b.lastSeenMs - a.lastSeenMs || compareIds(a.heartbeat.session_id, b.heartbeat.session_id))
      .map(projectSession);
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Images need both the client's own support and the command protocol that carries them. */
export function supportsImages(heartbeat: Heartbeat): boolean {
  return heartbeat.supports_images && heartbeat.command_protocol >= 2;
}

/** The only view of a session that leaves the server: no runtime id, no paths, no content. */
export function projectSession(entry: SessionEntry): SessionProjection {
  const { heartbeat } = entry;
  const project = shownName(heartbeat.project);
  const activity = heartbeat.state === "running" ? (heartbeat.activity ?? null) : null;
  return {
    session_id: heartbeat.session_id,
    project: project.text,
    model: heartbeat.model === null ? null : visibleControls(heartbeat.model),
    state: heartbeat.state,
    activity: activity === null ? null : visibleControls(activity),
    supports_images: supportsImages(heartbeat),
    last_activity_at: heartbeat.last_activity_at,
    last_seen_at: new Date(entry.lastSeenMs).toISOString(),
    mixed_scripts: project.mixedScripts,
  };
}

function compareIds(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/** One page of `list()`'s order; the cursor names the last session by its place (last seen, id), so sessions that heartbeat between pages shift nothing
 * after it. */
export function pageSessions(list: readonly SessionProjection[], cursor: string | undefined, limit: number): OperatorSessionList {
  let start = 0;
  if (cursor !== undefined) {
    const colon = cursor.indexOf(":");
    const [ms, id] = [Number(cursor.slice(0, colon)), cursor.slice(colon + 1)];
    const index = list.findIndex((s) => {
      const seenMs = Date.parse(s.last_seen_at);
      return seenMs < ms || (seenMs === ms && compareIds(s.session_id, id) > 0);
    });
    start = index < 0 ? list.length : index;
  }
  const sessions = list.slice(start, start + limit);
  const last = sessions.at(-1);
  const more = start + limit < list.length && last !== undefined;
  return { sessions, next_cursor: more ? `${Date.parse(last.last_seen_at)}:${last.session_id}` : null };
}
