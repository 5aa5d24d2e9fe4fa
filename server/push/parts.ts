/**
 * The ntfy route's parts, built once when it is configured: the receipts and capabilities, the
 * pusher, the answer buttons; and the hooks the plugin calls (an accepted notice, an approval change).
 */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { ApprovalStore } from "../approvals/store.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventStore } from "../events/store.ts";
import { instanceText } from "../locales/load.ts";
import type { UrgentKind } from "../mute/decisions.ts";
import type { MuteStore } from "../mute/store.ts";
import { PushAnswers } from "./answers.ts";
import { pushTarget, type PushConfig } from "./config.ts";
import { Pusher } from "./pusher.ts";
import { PushStore } from "./store.ts";

export interface PushSettings extends PushConfig {
  ntfyCompletions: boolean;
  ntfyRetryDelayMs: number;
  breakThrough: readonly UrgentKind[];
  maxAttempts: number;
  retentionDays: number;
}

export interface PushNeeds {
  events: EventStore;
  approvalStore: ApprovalStore;
  audit: AuditLog;
  mutes: MuteStore;
  noBot: boolean;
  /** How a press is decided: the approval service's own `decide`, as the chat's `anon.approve` calls it. */
  approvals: Pick<ApprovalService, "decide">;
}

/** The ntfy route's parts when it is configured (`ntfyUrl` and `ntfyTopic`), else undefined. */
export function pushParts(ctx: Context, config: PushSettings, needs: PushNeeds) {
  const target = pushTarget(config);
  if (!target) return undefined;
  const store = new PushStore(ctx);
  const answers = config.publicUrl ? new PushAnswers({ store, approvals: needs.approvals, publicUrl: config.publicUrl }) : undefined;
  const pusher = new Pusher(ctx, {
    store,
    events: needs.events,
    approvals: needs.approvalStore,
    audit: needs.audit,
    target,
    answers,
    consoleUrl: () => {
      const selfUrl = ctx.server?.selfUrl;
      return selfUrl ? `${selfUrl.replace(/\/+$/, "")}/anon-notify` : undefined;
    },
    noBot: needs.noBot,
    completions: config.ntfyCompletions,
    mute: { store: needs.mutes, breakThrough: config.breakThrough },
    maxAttempts: config.maxAttempts,
    retryDelayMs: config.ntfyRetryDelayMs,
  });
  const logger = ctx.logger("notify-webhook");
  const background = (work: Promise<void>) =>
    void work.catch((error: unknown) => logger.warn(instanceText(ctx, "anon-notify.push.log.background", { error: errorText(error) })));
  return {
    pusher,
    answers,
    offer: (eventId: string) => background(pusher.offerEvent(eventId)),
    approvalsChanged: () => background(pusher.offerApprovals()),
    /** Hourly: dead capabilities, and receipts kept as long as the event receipts (`retentionDays`). */
    prune: (now: Date) => store.prune(now, new Date(now.getTime() - config.retentionDays * 86_400_000)),
  };
}
