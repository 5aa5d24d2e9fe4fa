/** The command channel: the instruction and control channels over the server's two lanes, started and stopped together on one connection. */
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { ControlChannel } from "./extension/command-channel/control-channel.ts";
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

/** Registers the renderer and the Pi handlers; call once from the extension factory. */
export function installCommandChannel(pi: ExtensionAPI, deps: CommandChannelDeps) {
  const instructions = new InstructionChannel(pi, deps);
  const control = new ControlChannel(deps.server, deps.runNow);
  return {
    /** Starts both channels for the session of `ctx` once presence has been accepted. Idempotent. */
    start(ctx: ExtensionContext): void {
      if (instructions.running) return;
      const connection = deps.connection();
      if (!connection) return deps.report(deps.text().commands.noConnection);
      // `command.enabled: false` switches off polling only; presence still runs.
      if (!connection.config.command.enabled) return;
      const lane = new LaneConnection(connection, deps);
      control.start(ctx, lane);
      instructions.start(ctx, lane);
    },
    /** Stops claiming and waits for ACKs in flight. Commands already handed to Pi are still confirmed. */
    async stop() {
      control.stop();
      await instructions.stop();
    },
    /** Claimed but not yet in the session: held for a boundary, or handed to Pi's queue. */
    pending: () => instructions.pending(),
    /** Where a feature registers the handler of its control kind (protocol 3). `stop` is built in. */
    control,
  };
}
export type CommandChannel = ReturnType<typeof installCommandChannel>;
