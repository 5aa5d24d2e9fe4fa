/**
 * A stand-in for YesImBot v3's world-state and agent services, with the shapes the persona adapter
 * relies on as YesImBot 3.0.3 has them: `yesimbot.world-state.recordSystemEvent` and the
 * `yesimbot.agent` scheduler's `runningTasks` (the Set of chat cids mid-turn). Stimuli are observed
 * with `ctx.on('agent/stimulus')`, as AgentCore listens for them. The real plugin runs in
 * test/persona/yesimbot-real.test.ts; this one keeps the worker's fault tests fast.
 */
import { createRequire } from "node:module";
import type { Context } from "koishi";
import { koishi } from "../../server/koishi.ts";
import type { SystemEventRecord, SystemEventStimulus } from "../../server/persona/yesimbot-v3.ts";
import type { KoishiHarness, Use } from "../../harness/koishi.ts";

export class WorldStateStandIn extends koishi.Service {
  readonly recorded: SystemEventRecord[] = [];

  constructor(ctx: Context) {
    super(ctx, "yesimbot.world-state", true);
  }

  /** Like YesImBot's: the id is the primary key, and a failed write is logged, never thrown. */
  async recordSystemEvent(event: SystemEventRecord): Promise<void> {
    if (this.recorded.some((row) => row.id === event.id)) return;
    this.recorded.push(event);
  }
}

/** The owner's private chat on the mock bot `withPersona` provides (recipient 10001). */
export const OWNER_CHAT_CID = "mock:private:10001";

export class AgentStandIn extends koishi.Service {
  readonly stimuli: SystemEventStimulus[] = [];
  readonly scheduler = { runningTasks: new Set<string>() };

  /** Whether the owner's private chat is mid-turn. */
  get busy(): boolean {
    return this.scheduler.runningTasks.has(OWNER_CHAT_CID);
  }

  set busy(busy: boolean) {
    if (busy) this.scheduler.runningTasks.add(OWNER_CHAT_CID);
    else this.scheduler.runningTasks.delete(OWNER_CHAT_CID);
  }

  constructor(ctx: Context) {
    super(ctx, "yesimbot.agent", true);
    ctx.on("agent/stimulus", (stimulus) => {
      this.stimuli.push(stimulus);
    });
  }
}

const mockModule = createRequire(import.meta.url)("@koishijs/plugin-mock");
export const MockBot = mockModule.default;
/** plugin-mock's own message encoder: `new MockMessenger(client, options).send(fragment)`. */
export const MockMessenger = mockModule.MockMessenger as new (client: unknown, options?: unknown) => { send(fragment: unknown): Promise<unknown[]> };

/** A mock bot `mock:514` and both YesImBot v3 stand-ins: configure `botId: "mock:514"`. */
export function withPersona(use: Use): void {
  use(MockBot, { selfId: "514" });
  use(WorldStateStandIn);
  use(AgentStandIn);
}

export function worldState(koishi: KoishiHarness): WorldStateStandIn {
  return koishi.app["yesimbot.world-state"] as unknown as WorldStateStandIn;
}

export function agent(koishi: KoishiHarness): AgentStandIn {
  return koishi.app["yesimbot.agent"] as unknown as AgentStandIn;
}
