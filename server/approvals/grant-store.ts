/** The `anon_notify_grant` table, kept after grants end as the record; revocation and each use are
 * conditional writes, so a revoked grant is never used after the revocation landed. */
import type { Context, Query } from "koishi";
import type { GrantRecord } from "./grant-rules.ts";

declare module "koishi" {
  interface Tables {
    anon_notify_grant: GrantRecord;
  }
}

export const GRANT_TABLE = "anon_notify_grant";

export class GrantStore {
  readonly #ctx: Context;

  constructor(ctx: Context) {
    this.#ctx = ctx;
    ctx.model.extend(
      GRANT_TABLE,
      {
        seq: "unsigned",
        grant_id: { type: "string", length: 8 },
        session_id: { type: "string", length: 128 },
        rules: "json",
        argv: { type: "json", nullable: true },
        prefix: { type: "boolean", initial: false },
        cwd: { type: "text", initial: "" },
        approval_id: { type: "string", length: 128 },
        created_by: { type: "string", length: 255 },
        via: { type: "string", length: 16 },
        created_at: "timestamp",
        expires_at: "timestamp",
        revoked_at: { type: "timestamp", nullable: true },
        revoked_by: { type: "string", length: 255, nullable: true },
        uses: "unsigned",
      },
      { primary: "seq", autoInc: true, unique: ["grant_id"] },
    );
  }

  async get(grantId: string): Promise<GrantRecord | undefined> {
    return (await this.#ctx.database.get(GRANT_TABLE, { grant_id: grantId }))[0];
  }

  async ids(): Promise<Set<string>> {
    return new Set((await this.#ctx.database.get(GRANT_TABLE, {}, ["grant_id"])).map((row) => row.grant_id));
  }

  async create(grant: Omit<GrantRecord, "seq">): Promise<GrantRecord> {
    return this.#ctx.database.create(GRANT_TABLE, grant);
  }

  async live(now: Date, sessionId?: string): Promise<GrantRecord[]> {
    const query: Query<GrantRecord> = { revoked_at: { $exists: false }, expires_at: { $gt: now }, ...(sessionId ? { session_id: sessionId } : {}) };
    return this.#ctx.database.get(GRANT_TABLE, query, { sort: { seq: "desc" } });
  }

  async list(filter: { live?: Date; sessionId?: string | undefined; limit: number }): Promise<GrantRecord[]> {
    if (filter.live) return (await this.live(filter.live, filter.sessionId)).slice(0, filter.limit);
    return this.#ctx.database.get(GRANT_TABLE, filter.sessionId ? { session_id: filter.sessionId } : {}, { sort: { seq: "desc" }, limit: filter.limit });
  }

  /** Ends a grant that is still unrevoked; false when another revocation landed first. */
  async revoke(grantId: string, patch: Pick<GrantRecord, "revoked_at" | "revoked_by">): Promise<boolean> {
    return (await this.#ctx.database.set(GRANT_TABLE, { grant_id: grantId, revoked_at: { $exists: false } }, patch)).matched === 1;
  }

  /** Counts one use if the grant is still unrevoked, unexpired at `now`, and used `uses` times so far; false otherwise. */
  async use(grantId: string, uses: number, now: Date): Promise<boolean> {
    const unused = { grant_id: grantId, revoked_at: { $exists: false }, expires_at: { $gt: now }, uses };
    return (await this.#ctx.database.set(GRANT_TABLE, unused, { uses: uses + 1 })).matched === 1;
  }

  async prune(cutoff: Date): Promise<number> {
    return (await this.#ctx.database.remove(GRANT_TABLE, { expires_at: { $lt: cutoff } })).removed ?? 0;
  }
}
