/** The command channel's face: the instruction and control channels over the server's two lanes of one
 * queue, started and stopped together on one connection and journal (extension/command-channel/). */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { ControlChannel } from "./extension/command-channel/control-channel.ts";
import type { ControlRegistry } from "./extension/command-channel/control-channel.ts";
import { InstructionChannel, type InstructionChannelDeps } from "./extension/command-channel/instruction-channel.ts";
import { LaneConnection } from "./extension/command-channel/lane.ts";
import type { Presence, PresenceDeps } from "./extension/presence/presence.ts";
import type { StoppedRun } from "./protocol/queue.ts";

/** The same session edge as presence, what the server said (its accepted heartbeat gates claiming), presence's beat, and the notices' way in. */
export interface CommandChannelDeps extends Omit<PresenceDeps, "server">, InstructionChannelDeps {
  presence: Pick<Presence, "beat">;
  /** The run in progress as a stop's ACK names it. */
  runNow: () => StoppedRun | undefined;
}

export interface CommandChannel {
  /** Starts both channels for the session of `ctx` once presence has been accepted. Idempotent. */
  start(ctx: ExtensionContext): void;
  /** Stops claiming and waits for ACKs in flight. Commands already handed to Pi are still confirmed. */
  stop(): Promise<void>;
  /** Claimed but not yet in the session: held for a boundary, or handed to Pi's queue. */
  pending(): { held: string | null; queued: string[] };
  /** Where a feature registers the handler of its control kind (protocol 3). `stop` is built in. */
  readonly control: ControlRegistry;
}

/** Registers the renderer and the Pi handlers; call once from the extension factory. */
export function installCommandChannel(pi: ExtensionAPI, deps: CommandChannelDeps): CommandChannel {
  const instructions = new InstructionChannel(pi, deps);
  const control = new ControlChannel(deps.server, deps.runNow);
  return {
    start(ctx) {
      if (instructions.running) return;
      const connection = deps.connection();
      if (!connection) return deps.report(deps.text().commands.noConnection);
      // `command.enabled: false` switches off polling only; presence still runs.
      if (!connection.config.command.enabled) return;
      const lane = new LaneConnection(connection, deps);
      control.start(ctx, lane);
      instructions.start(ctx, lane);
    },
    async stop() {
      control.stop();
      await instructions.stop();
    },
    pending: () => instructions.pending(),
    control,
  };
}
