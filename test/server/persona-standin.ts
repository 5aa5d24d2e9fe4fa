/**
 * A stand-in for YesImBot v3's world-state and agent services, implementing exactly the shapes the
 * persona adapter relies on: `yesimbot.world-state.recordSystemEvent` and the
 * `yesimbot.agent` scheduler's `isBusy`. Stimuli are observed with `ctx.on('agent/stimulus')`, as
 * AgentCore listens for them.
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

  async recordSystemEvent(event: SystemEventRecord): Promise<void> {
    this.recorded.push(event);
  }
}

export class AgentStandIn extends koishi.Service {
  busy = false;
  readonly stimuli: SystemEventStimulus[] = [];
  readonly scheduler = { isBusy: (_channelCid: string) => this.busy };

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
