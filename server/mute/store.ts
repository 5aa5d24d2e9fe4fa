/** The mutes, stored and mirrored in memory; an ended mute stays stored until its held notices went out as one digest, so a restart still releases them. */
import type { Context } from "koishi";
import { isMuted, scopeOf, type Mute } from "./decisions.ts";

export const MUTE_TABLE = "anon_notify_mute";

type MuteRow = Mute & { scope: string; created_at: Date };

declare module "koishi" {
  interface Tables {
    [MUTE_TABLE]: MuteRow;
  }
}

export class MuteStore {
  readonly #ctx: Context;
  readonly #now: () => Date;
  #mutes: Mute[] = [];
  #markLoaded!: () => void;
  /** Resolves once the stored mutes are known: nothing may be delivered before that. */
  readonly loaded = new Promise<void>((resolve) => (this.#markLoaded = resolve));
  #cancelTimer: (() => void) | undefined;
  readonly #listeners = new Set<() => void>();

  constructor(ctx: Context, now: () => Date = () => new Date()) {
    this.#ctx = ctx;
    this.#now = now;
    ctx.model.extend(
      MUTE_TABLE,
      {
        scope: "string(128)",
        session_id: { type: "string", length: 128, nullable: true },
        until: "timestamp",
        created_at: "timestamp",
      },
      { primary: "scope" },
    );
  }

  async load(): Promise<void> {
    const rows = await this.#ctx.database.get(MUTE_TABLE, {});
    this.#mutes = rows.map((row) => ({ session_id: row.session_id, until: new Date(row.until) }));
    this.#markLoaded();
    this.#reschedule();
  }

  all(): Mute[] {
    return [...this.#mutes];
  }

  running(): Mute[] {
    const now = this.#now();
    return this.#mutes.filter((mute) => mute.until > now);
  }

  isMuted(sessionId: string): boolean {
    return isMuted(this.#mutes, sessionId, this.#now());
  }

  async mute(sessionId: string | null, until: Date): Promise<Mute> {
    const row = { scope: scopeOf(sessionId), session_id: sessionId, until, created_at: this.#now() };
    await this.#ctx.database.upsert(MUTE_TABLE, [row]);
    const mute = { session_id: sessionId, until };
    this.#mutes = [...this.#mutes.filter((m) => scopeOf(m.session_id) !== row.scope), mute];
    this.#reschedule();
    return mute;
  }

  /** Ends the running mute of `sessionId`, or with `null` every running mute; returns how many
   * ended. Their held notices are released by the `onEnd` listeners. */
  async unmute(sessionId: string | null): Promise<number> {
    const now = this.#now();
    const ending = this.#mutes.filter((m) => m.until > now && (sessionId === null || m.session_id === sessionId));
    if (ending.length === 0) return 0;
    const scopes = ending.map((m) => scopeOf(m.session_id));
    await this.#ctx.database.set(MUTE_TABLE, { scope: scopes }, { until: now });
    this.#mutes = this.#mutes.map((m) => (scopes.includes(scopeOf(m.session_id)) ? { ...m, until: now } : m));
    this.#reschedule();
    this.#ended();
    return ending.length;
  }

  /** Forgets the mutes that had ended by `endedBy` (their notices are released); a mute set again since stays. */
  async forget(endedBy: Date): Promise<void> {
    await this.#ctx.database.remove(MUTE_TABLE, { until: { $lte: endedBy } });
    this.#mutes = this.#mutes.filter((m) => m.until > endedBy);
  }

  onEnd(listener: () => void): () => void {
    this.#listeners.add(listener);
    return () => void this.#listeners.delete(listener);
  }

  #ended(): void {
    for (const listener of this.#listeners) listener();
  }

  /** One timer, at the earliest running mute's end. */
  #reschedule(): void {
    this.#cancelTimer?.();
    this.#cancelTimer = undefined;
    const now = this.#now().getTime();
    const next = Math.min(...this.#mutes.map((m) => m.until.getTime()).filter((t) => t > now));
    if (!Number.isFinite(next)) return;
    this.#cancelTimer = this.#ctx.setTimeout(() => {
      this.#reschedule();
      this.#ended();
    }, next - now);
  }
}
