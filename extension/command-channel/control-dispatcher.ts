/** Control commands to their handlers by kind, so a feature registers its own kind without editing the channel. */
import { errorText } from "../../common/errors.ts";
import type { CommandOutcome, ControlKind } from "../../protocol/queue.ts";
import { allowedOutcome } from "./control-rules.ts";

export interface ControlCommand {
  commandId: string;
  kind: string;
  payload: Record<string, unknown>;
}

/** Applies one control command and says what happened; never throws on purpose (a throw is `unknown`). */
export type ControlHandler = (command: ControlCommand) => CommandOutcome | Promise<CommandOutcome>;

/** Where a feature registers the handler of its control kind; returns the unregister. */
export interface ControlRegistry {
  on(kind: ControlKind, handler: ControlHandler): () => void;
}

export class ControlDispatcher implements ControlRegistry {
  readonly #handlers = new Map<string, ControlHandler>();

  /** Registers the handler of `kind`; returns the unregister. A later registration replaces an earlier one. */
  on(kind: ControlKind, handler: ControlHandler): () => void {
    this.#handlers.set(kind, handler);
    return () => {
      if (this.#handlers.get(kind) === handler) this.#handlers.delete(kind);
    };
  }

  /** The handler's outcome if it is one its kind allows; `unknown` for a kind nobody handles or a
   * failed handler. `failed` hears why a handler threw, to be worded for the person by the caller. */
  async dispatch(command: ControlCommand, failed: (why: string) => void): Promise<CommandOutcome> {
    const handler = this.#handlers.get(command.kind);
    if (!handler) return "unknown";
    try {
      const outcome = await handler(command);
      return allowedOutcome(command.kind, outcome);
    } catch (error) {
      failed(errorText(error));
      return "unknown";
    }
  }
}
