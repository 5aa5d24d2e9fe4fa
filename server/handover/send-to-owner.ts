/** Messages to the owner that are not notices, as escaped text; it sends once, and callers that must not
 * lose one retry on `OwnerUnreachable`. */
import type { Context } from "koishi";
import { sendDirectText, type DirectTarget, type OwnerButton } from "./direct.ts";

/** Sends `text` (with buttons where the platform has them) to the owner; resolves with the platform's message id (null if it gives none). */
export type SendToOwner = (text: string, buttons?: readonly OwnerButton[]) => Promise<string | null>;

export class OwnerUnreachable extends Error {
  /** Trying again later may work (bot offline, send failed), unlike a missing configuration. */
  readonly retryable: boolean;

  constructor(reason: string, retryable: boolean) {
    super(reason);
    this.name = "OwnerUnreachable";
    this.retryable = retryable;
  }
}

export function ownerSender(ctx: Context, target: DirectTarget): SendToOwner {
  return async (text, buttons) => {
    const outcome = await sendDirectText(ctx, target, text, buttons);
    if (outcome.kind === "error") throw new OwnerUnreachable(outcome.error, outcome.retryable);
    return outcome.messageId;
  };
}
