/** The calls waiting for a person, each a local promise: the first answer settles it, every later one is told so. */
import type { ApprovalBinding, ApprovalDecisionOutcome, ApprovalDecisionPayload, ApprovalOutcome, ApprovalVia } from "../../protocol/approvals.ts";

export interface Answer {
  outcome: ApprovalOutcome;
  via: ApprovalVia;
  reason: string | null;
  grant?: ApprovalDecisionPayload["grant"];
}

/** Settled ids remembered so a late decision hears "already answered", not "unknown". */
const REMEMBERED = 256;

export class Waits {
  readonly #open = new Map<string, { binding: ApprovalBinding; settle(answer: Answer): void }>();
  readonly #settled = new Set<string>();

  open(approvalId: string, binding: ApprovalBinding): Promise<Answer> {
    return new Promise((resolve) => {
      this.#open.set(approvalId, {
        binding,
        settle: (answer) => {
          this.#open.delete(approvalId);
          this.#settled.add(approvalId);
          if (this.#settled.size > REMEMBERED) this.#settled.delete(this.#settled.values().next().value!);
          resolve(answer);
        },
      });
    });
  }

  /** First answer wins: true when this one settled the wait. */
  settle(approvalId: string, answer: Answer): boolean {
    const wait = this.#open.get(approvalId);
    if (!wait) return false;
    wait.settle(answer);
    return true;
  }

  decide(payload: ApprovalDecisionPayload): ApprovalDecisionOutcome {
    const wait = this.#open.get(payload.approval_id);
    if (!wait) return this.#settled.has(payload.approval_id) ? "already_answered" : "unknown";
    // The call stays waiting: a decision about anything else is no answer to it.
    const [a, b] = [wait.binding, payload.binding];
    if (a.tool_call_id !== b.tool_call_id || a.args_digest !== b.args_digest || a.cwd !== b.cwd) return "mismatch";
    wait.settle({ outcome: payload.decision, via: payload.via, reason: payload.reason, ...(payload.grant ? { grant: payload.grant } : {}) });
    return "applied";
  }
}
