/** What the server deletes, at start and hourly; pending events and active commands never, and the window
 * outlasts a client's resend, so idempotency holds. The API waits at 503 for the first pass. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { retentionCutoff } from "../audit/store.ts";
import type { HttpApi } from "../http/api.ts";
import { instanceText } from "../locales/load.ts";

const PRUNE_INTERVAL_MS = 60 * 60 * 1000;

type Prunable = { prune(cutoff: Date): Promise<number> };
type RetentionDeps = { api: HttpApi; auditRetentionDays: number; retentionDays: number } & Record<
  "audit" | "events" | "commands" | "approvals" | "grants",
  Prunable
>;

export const Retention = {
  name: "notify-webhook-retention",
  reusable: true,
  apply(ctx: Context, { api, audit, events, commands, approvals, grants, auditRetentionDays, retentionDays }: RetentionDeps) {
    const logger = ctx.logger("notify-webhook");
    const tables: [string, number, (cutoff: Date) => Promise<number>][] = [
      ["audit", auditRetentionDays, (cutoff) => audit.prune(cutoff)],
      ["receipts", retentionDays, (cutoff) => events.prune(cutoff)],
      ["commands", retentionDays, (cutoff) => commands.prune(cutoff)],
      ["approvals", retentionDays, (cutoff) => approvals.prune(cutoff)],
      ["grants", retentionDays, (cutoff) => grants.prune(cutoff)],
    ];
    const prune = async () => {
      for (const [table, days, remove] of tables) {
        const what = instanceText(ctx, `anon-notify.log.tables.${table}`, {});
        try {
          const removed = await remove(retentionCutoff(Date.now(), days));
          if (removed > 0) logger.info(instanceText(ctx, "anon-notify.log.pruned", { count: removed, what, days }));
        } catch (error) {
          logger.warn(instanceText(ctx, "anon-notify.log.prune-failed", { what, error: errorText(error) }));
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
