/**
 * YesImBot v3 (koishi-plugin-yesimbot 3.0.x) as a persona. Loaded in a sub-scope that exists only
 * while `yesimbot.world-state` and `yesimbot.agent` do, so YesImBot can be installed, reloaded or
 * removed without restarting this plugin. YesImBot is not installable from this project's
 * registry, so the shapes this adapter uses are declared here by duck typing.
 *
 * The block goes into the recipient's direct chat as a system event (`recordSystemEvent`, durable
 * in YesImBot's history), then a `system_event` stimulus starts a turn when the chat is idle.
 * v3 drops non-message stimuli while that chat is mid-turn; where the release exposes its
 * scheduler's `isBusy`, a busy chat answers `busy` and the worker retries later (defer). Without
 * that probe a dropped trigger still leaves the event in history for the next turn.
 */
import type { Bot, Context } from "koishi";
import { findBot } from "../delivery/bot.ts";
import { withoutMarkers } from "./block.ts";
import type { InjectOutcome, PersonaEvent, PersonaSlot } from "./port.ts";

export const YESIMBOT_V3_SERVICES = ["yesimbot.world-state", "yesimbot.agent"] as const;
export const YESIMBOT_V3_PRIORITY = 10;
export const SYSTEM_EVENT_TYPE = "anon_notify_event";

/** `WorldStateService.recordSystemEvent` input (v3 `src/services/worldstate`). */
export interface SystemEventRecord {
  id: string;
  platform: string;
  channelId: string;
  type: string;
  timestamp: Date;
  payload: object;
  message: string;
}

export interface WorldStateLike {
  recordSystemEvent(event: SystemEventRecord): Promise<unknown>;
}

/** Only the part of `AgentCore` we probe: its (TypeScript-private) scheduler. */
export interface AgentCoreLike {
  scheduler?: { isBusy?: (channelCid: string) => boolean };
}

export interface SystemEventStimulus {
  type: "system_event";
  channelCid: string;
  session: ReturnType<Bot["session"]>;
  priority: number;
  payload: { eventType: string; details: object; message: string };
}

declare module "koishi" {
  interface Context {
    "yesimbot.world-state": WorldStateLike;
    "yesimbot.agent": AgentCoreLike;
  }
  interface Events {
    "agent/stimulus"(stimulus: SystemEventStimulus): void;
  }
}

export interface YesImBotTarget {
  botId: string;
  recipientId: string;
  stimulusPriority: number;
}

export const YesImBotV3 = {
  name: "notify-webhook-yesimbot-v3",
  reusable: true,
  apply(ctx: Context, { personas, target }: { personas: PersonaSlot; target: YesImBotTarget }) {
    ctx.inject([...YESIMBOT_V3_SERVICES], (scope) => {
      scope.logger("notify-webhook").info("YesImBot v3 detected: events go to its main conversation");
      personas.provide(scope, { name: "yesimbot-v3", inject: (event) => injectV3(scope, target, event) }, YESIMBOT_V3_PRIORITY);
    });
  },
};

async function injectV3(ctx: Context, target: YesImBotTarget, { eventId, block, event, attempt }: PersonaEvent): Promise<InjectOutcome> {
  if (!target.botId || !target.recipientId) {
    return { kind: "error", retryable: false, error: "persona_not_configured: 未配置 botId 或 recipientId，无法确定 Anon 的主会话" };
  }
  const bot = findBot(ctx, target.botId);
  if (!bot) return { kind: "error", retryable: true, error: `bot_not_found: 找不到机器人 ${target.botId}` };
  // OneBot names a private chat `private:<user id>` (adapter-onebot createDirectChannel).
  const channelId = `private:${target.recipientId}`;
  const session = bot.session({
    type: "message",
    timestamp: Date.now(),
    channel: { id: channelId, type: 1 /* Universal.Channel.Type.DIRECT */ },
    user: { id: target.recipientId },
  });
  const scheduler = ctx["yesimbot.agent"].scheduler;
  if (typeof scheduler?.isBusy === "function" && scheduler.isBusy(session.cid)) {
    return { kind: "busy", reason: `YesImBot 会话 ${session.cid} 正在进行回合` };
  }
  // Handed on as an object, so its agent-written text is defused the way the block's is.
  const eventObject = withoutMarkers({ ...event }) as object;
  await ctx["yesimbot.world-state"].recordSystemEvent({
    // Unique per attempt: a repeat after a crash is a new history entry, not a key conflict that blocks the event.
    id: `anon-notify:${eventId}:${attempt}`,
    platform: session.platform,
    channelId,
    type: SYSTEM_EVENT_TYPE,
    timestamp: new Date(),
    payload: eventObject,
    message: block,
  });
  ctx.emit("agent/stimulus", {
    type: "system_event",
    channelCid: session.cid,
    session,
    priority: target.stimulusPriority,
    payload: { eventType: SYSTEM_EVENT_TYPE, details: eventObject, message: block },
  });
  return { kind: "injected" };
}
