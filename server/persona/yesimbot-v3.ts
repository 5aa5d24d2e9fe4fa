/** YesImBot v3 as a persona, in a sub-scope that exists while its services do; a block goes in as a system
 * event and a `system_event` stimulus, and a chat mid-turn answers `busy` so the worker retries later. */
import { createHash } from "node:crypto";
import type { Bot, Context } from "koishi";
import { findBot } from "../bot.ts";
import { withoutMarkers } from "./block-rules.ts";
import { deliveryError, type InjectOutcome } from "../handover/decisions.ts";
import { instanceSay, instanceText } from "../locales/load.ts";
import type { PersonaEvent, PersonaSlot } from "./port.ts";

/** Above the log persona's 0. */
const YESIMBOT_V3_PRIORITY = 10;

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

export interface SystemEventStimulus {
  type: "system_event";
  channelCid: string;
  session: ReturnType<Bot["session"]>;
  priority: number;
  payload: { eventType: string; details: object; message: string };
}

declare module "koishi" {
  interface Context {
    "yesimbot.world-state": { recordSystemEvent(event: SystemEventRecord): Promise<unknown> };
    /** Only the part of `AgentCore` we probe: its (TypeScript-private) scheduler's chats mid-turn. */
    "yesimbot.agent": { scheduler?: { runningTasks?: unknown } };
  }
  interface Events {
    "agent/stimulus"(stimulus: SystemEventStimulus): void;
  }
}

type YesImBotTarget = { botId: string; recipientId: string; stimulusPriority: number };

export const YesImBotV3 = {
  name: "notify-webhook-yesimbot-v3",
  reusable: true,
  apply(ctx: Context, { personas, target }: { personas: PersonaSlot; target: YesImBotTarget }) {
    ctx.inject(["yesimbot.world-state", "yesimbot.agent"], (scope) => {
      scope.logger("notify-webhook").info(instanceText(scope, "anon-notify.log.yesimbot", {}));
      // Events recorded by this scope whose trigger still has to be sent (the chat turned busy in between).
      const recorded = new Set<string>();
      personas.provide(scope, { name: "yesimbot-v3", inject: (event) => injectV3(scope, target, recorded, event) }, YESIMBOT_V3_PRIORITY);
    });
  },
};

/** The system event's id: one per event, so a repeated hand-over never adds a second history entry; 64 characters at most (YesImBot's column). */
function systemEventId(eventId: string): string {
  return `anon-notify:${createHash("sha256").update(eventId).digest("hex").slice(0, 40)}`;
}

function isMidTurn(ctx: Context, channelCid: string): boolean {
  const running = ctx["yesimbot.agent"].scheduler?.runningTasks;
  return running instanceof Set && running.has(channelCid);
}

async function injectV3(ctx: Context, target: YesImBotTarget, recorded: Set<string>, { eventId, block, event }: PersonaEvent): Promise<InjectOutcome> {
  if (!target.botId || !target.recipientId) {
    return { kind: "error", retryable: false, error: deliveryError(instanceSay(ctx), "persona_not_configured") };
  }
  const bot = findBot(ctx, target.botId);
  if (!bot) return { kind: "error", retryable: true, error: deliveryError(instanceSay(ctx), "bot_not_found", target.botId) };
  // OneBot names a private chat `private:<user id>` (adapter-onebot createDirectChannel).
  const channelId = `private:${target.recipientId}`;
  const session = bot.session({
    type: "message",
    timestamp: Date.now(),
    channel: { id: channelId, type: 1 /* Universal.Channel.Type.DIRECT */ },
    user: { id: target.recipientId },
  });
  const busy = { kind: "busy", reason: instanceText(ctx, "anon-notify.delivery-errors.persona-mid-turn", [session.cid]) } as const;
  // Handed on as an object, so its agent-written text is defused the way the block's is.
  const eventObject = withoutMarkers({ ...event }) as object;
  if (!recorded.has(eventId)) {
    if (isMidTurn(ctx, session.cid)) return busy;
    // YesImBot logs and swallows a failed write (a repeat after a crash is a key conflict, no second entry).
    await ctx["yesimbot.world-state"].recordSystemEvent({
      id: systemEventId(eventId),
      platform: session.platform,
      channelId,
      type: SYSTEM_EVENT_TYPE,
      timestamp: new Date(),
      payload: eventObject,
      message: block,
    });
    recorded.add(eventId);
  }
  // A turn that started during the write would drop the trigger; the next attempt only sends it.
  if (isMidTurn(ctx, session.cid)) return busy;
  recorded.delete(eventId);
  ctx.emit("agent/stimulus", {
    type: "system_event",
    channelCid: session.cid,
    session,
    priority: target.stimulusPriority,
    payload: { eventType: SYSTEM_EVENT_TYPE, details: eventObject, message: block },
  });
  return { kind: "injected" };
}
