/** What one delivery attempt can come to, and what the event worker does after it, pure: finish, or retry after a delay. */
import type { ReceiptState } from "../../protocol/events.ts";
import type { Say } from "../locales/load.ts";

/** What handing an event to the persona came to (a persona's `inject` answers it). */
export type InjectOutcome =
  | { kind: "injected" }
  /** The conversation is mid-turn and would drop the trigger: try again later. */
  | { kind: "busy"; reason: string }
  | { kind: "error"; retryable: boolean; error: string };

export type DirectOutcome = { kind: "delivered"; messageId: string | null } | { kind: "error"; retryable: boolean; error: string };

export type WorkOutcome = InjectOutcome | DirectOutcome;

/** `say` words the "gave up" note in the server's language. */
export type RetryPolicy = { maxAttempts: number; retryDelayMs: number; say: Say };

export type Step =
  | { kind: "finish"; state: Extract<ReceiptState, "context_injected" | "delivered" | "failed">; error: string | null; messageId: string | null }
  | { kind: "retry"; error: string; delayMs: number };

export function decideStep(outcome: WorkOutcome, attempts: number, policy: RetryPolicy): Step {
  switch (outcome.kind) {
    case "injected":
      return { kind: "finish", state: "context_injected", error: null, messageId: null };
    case "delivered":
      return { kind: "finish", state: "delivered", error: null, messageId: outcome.messageId };
    case "busy":
    case "error": {
      const error = outcome.kind === "busy" ? `persona_busy: ${outcome.reason}` : outcome.error;
      const retryable = outcome.kind === "busy" || outcome.retryable;
      if (retryable && attempts < policy.maxAttempts) return { kind: "retry", error, delayMs: policy.retryDelayMs };
      const suffix = retryable ? policy.say("anon-notify.delivery-errors.gave-up", [attempts]) : "";
      return { kind: "finish", state: "failed", error: error + suffix, messageId: null };
    }
  }
}

type DeliveryErrorCode = "direct_not_configured" | "persona_not_configured" | "bot_not_found" | "bot_offline" | "no_persona" | "send_failed" | "exception";

/** A receipt's error: the code first (what clients read, docs/protocol.md), then the reason in the server's language. */
export function deliveryError(say: Say, code: DeliveryErrorCode, ...params: string[]): string {
  return `${code}: ${say(`anon-notify.delivery-errors.${code}`, params)}`;
}

/** A receipt's error as a log line: the reason first, the code in brackets; one not in the `code: reason` form as it is. */
export function errorInWords(say: Say, error: string): string {
  const match = /^([a-z][a-z_]*): ([\s\S]+)$/.exec(error);
  return match ? say("anon-notify.reason-with-code", { reason: match[2], code: match[1] }) : error;
}
