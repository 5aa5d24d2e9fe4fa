/**
 * Retention: what the server deletes, at start and every hour. Audit rows older than
 * `auditRetentionDays`; final event receipts and final commands last changed, closed approvals
 * created, and standing grants ended, more than `retentionDays` ago. Pending events and active commands are never pruned, whatever their age, and
 * the window is longer than a client resends an event (its outbox), so idempotency holds for every
 * event a client can still repeat. The API is held at 503 until the first pass has run.
 */
import type { Context } from "koishi";
import { errorText } from "../common/errors.ts";
import { retentionCutoff, type AuditLog } from "./audit/store.ts";
import type { GrantStore } from "./approvals/grant-store.ts";
import type { ApprovalStore } from "./approvals/store.ts";
import type { CommandStore } from "./queue/store.ts";
import type { EventStore } from "./events/store.ts";
import type { HttpApi } from "./http/api.ts";

const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

export interface RetentionDeps {
  api: HttpApi;
  audit: AuditLog;
  events: EventStore;
  commands: CommandStore;
  approvals: ApprovalStore;
  grants: GrantStore;
  auditRetentionDays: number;
  retentionDays: number;
}

export const Retention = {
  name: "notify-webhook-retention",
  reusable: true,
  apply(ctx: Context, { api, audit, events, commands, approvals, grants, auditRetentionDays, retentionDays }: RetentionDeps) {
    const logger = ctx.logger("notify-webhook");
    const tables: [string, number, (cutoff: Date) => Promise<number>][] = [
      ["audit rows", auditRetentionDays, (cutoff) => audit.prune(cutoff)],
      ["final event receipts", retentionDays, (cutoff) => events.prune(cutoff)],
      ["final commands", retentionDays, (cutoff) => commands.prune(cutoff)],
      ["closed approvals", retentionDays, (cutoff) => approvals.prune(cutoff)],
      ["ended grants", retentionDays, (cutoff) => grants.prune(cutoff)],
    ];
    const prune = async () => {
      for (const [what, days, remove] of tables) {
        try {
          const removed = await remove(retentionCutoff(Date.now(), days));
          if (removed > 0) logger.info("retention: pruned %d %s older than %d days", removed, what, days);
        } catch (error) {
          logger.warn("retention: pruning %s failed: %s", what, errorText(error));
        }
      }
    };
    const release = api.holdUntilReady(ctx);
    ctx.on("ready", async () => {
      await prune();
      release();
    });
    ctx.setInterval(() => void prune(), PRUNE_INTERVAL_MS);
  },
};
