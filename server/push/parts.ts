/** The push routes' parts, built once when configured, and the hooks the plugin calls. */
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import { CONSOLE_PAGE_PATH } from "../../protocol/wire.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { ApprovalStore } from "../approvals/store.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventStore } from "../events/store.ts";
import { instanceText } from "../locales/load.ts";
import type { UrgentKind } from "../mute/decisions.ts";
import type { MuteStore } from "../mute/store.ts";
import { PushAnswers } from "./answers.ts";
import type { PushConfig } from "./config.ts";
import { FeishuSender } from "./feishu.ts";
import { publish } from "./ntfy.ts";
import { Pusher } from "./pusher.ts";
import { PushStore } from "./store.ts";

export interface PushSettings extends PushConfig {
  ntfyCompletions: boolean;
  pushRetryDelayMs: number;
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

/** The push routes' parts when one is configured (ntfy, the Feishu bot, or both), else undefined. */
export function pushParts(ctx: Context, config: PushSettings, needs: PushNeeds) {
  const ntfy = config.ntfyUrl && config.ntfyTopic ? { url: config.ntfyUrl, topic: config.ntfyTopic, token: config.ntfyToken } : undefined;
  const feishu = config.feishuWebhook ? { url: config.feishuWebhook, secret: config.feishuSecret } : undefined;
  if (!ntfy && !feishu) return undefined;
  const store = new PushStore(ctx);
  const answers = ntfy && config.publicUrl ? new PushAnswers({ store, approvals: needs.approvals, publicUrl: config.publicUrl }) : undefined;
  const common = {
    store,
    events: needs.events,
    approvals: needs.approvalStore,
    audit: needs.audit,
    consoleUrl: () => {
      const selfUrl = ctx.server?.selfUrl;
      return selfUrl ? `${selfUrl.replace(/\/+$/, "")}${CONSOLE_PAGE_PATH}` : undefined;
    },
    noBot: needs.noBot,
    completions: config.ntfyCompletions,
    mute: { store: needs.mutes, breakThrough: config.breakThrough },
    maxAttempts: config.maxAttempts,
    retryDelayMs: config.pushRetryDelayMs,
  };
  const pushers: Pusher[] = [];
  if (ntfy) pushers.push(new Pusher(ctx, { ...common, route: "ntfy", send: (message) => publish(ntfy, message), answers }));
  if (feishu) {
    const sender = new FeishuSender(feishu);
    pushers.push(new Pusher(ctx, { ...common, route: "feishu", send: (message) => sender.send(message), answers: undefined }));
  }
  // What /health and GET /events/{id} show: the ntfy route's when it is configured, else the Feishu bot's.
  const shown = pushers[0]!;
  const logger = ctx.logger("notify-webhook");
  const background = (work: Promise<unknown>) =>
    void work.catch((error: unknown) => logger.warn(instanceText(ctx, "anon-notify.push.log.background", { error: errorText(error) })));
  return {
    /** The route an approval request is handed to first (the one with buttons when there is one). */
    route: shown.route,
    pusher: {
      receipt: (eventId: string) => shown.receipt(eventId),
      health: () => shown.health(),
      load: async () => void (await Promise.all(pushers.map((pusher) => pusher.load()))),
    },
    answers,
    offer: (eventId: string) => background(Promise.all(pushers.map((pusher) => pusher.offerEvent(eventId)))),
    approvalsChanged: () => background(Promise.all(pushers.map((pusher) => pusher.offerApprovals()))),
    /** Hourly: dead capabilities, and receipts kept as long as the event receipts (`retentionDays`). */
    prune: (now: Date) => store.prune(now, new Date(now.getTime() - config.retentionDays * 86_400_000)),
  };
}
