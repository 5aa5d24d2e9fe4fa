/** What the event worker does after one delivery attempt, pure: finish, or retry after a delay. */
import type { ReceiptState } from "../../protocol/events.ts";
import type { InjectOutcome } from "../persona/port.ts";
import type { DirectOutcome } from "./direct.ts";

export type WorkOutcome = InjectOutcome | DirectOutcome;

export interface RetryPolicy {
  maxAttempts: number;
  retryDelayMs: number;
}

export type Step =
  | { kind: "finish"; state: Extract<ReceiptState, "context_injected" | "delivered" | "failed">; error: string | null; messageId: string | null }
  | { kind: "retry"; error: string; delayMs: number };

/** What to do after one attempt. Pure. */
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
      const suffix = retryable ? `（已尝试 ${attempts} 次，放弃）` : "";
      return { kind: "finish", state: "failed", error: error + suffix, messageId: null };
    }
  }
}
