import { z } from "zod";
import { ApprovalAnswer, ApprovalReach, type ApprovalRequest, type ApprovalResolution } from "../../protocol/approvals.ts";
import type { ApiClient } from "../server-client/http-client.ts";
import type { Messages } from "../texts/messages.ts";
import { realSleep, runWithRetry, type Sleep } from "../server-client/retry.ts";

const REQUEST_TIMEOUT_MS = 10_000;
const RequestAnswer = ApprovalAnswer.extend({ reach: ApprovalReach, push: z.string().nullable() });
const BACKOFF_MS = 500;
/** While the call waits the request is tried again and again; the wait's end stops it. */
const REQUEST_ATTEMPTS = 1_000;
const RESOLUTION_ATTEMPTS = 8;

export type Outgoing = ReturnType<typeof createOutgoing>;
type Accepted = (code: string, reach: ApprovalReach, push: string | null, open: boolean) => void;

/** `request`'s retries stop when the wait ends; `accepted` gets the server's code, how it reaches the owner, the phone push it
 * went to, and whether it is still open (a grant may have approved it). The resolution follows only a request that arrived. */
export function createOutgoing(report: (message: string) => void, text: () => Messages, sleep: Sleep = realSleep) {
  const chains = new Map<string, { client: ApiClient; sent: Promise<boolean> }>();
  return {
    request(client: ApiClient, body: ApprovalRequest, waitEnded: AbortSignal, accepted: Accepted): void {
      const sent = (async () => {
        const result = await runWithRetry(() => client.request("POST", "approvals", { body, timeoutMs: REQUEST_TIMEOUT_MS, schema: RequestAnswer }), {
          maxAttempts: REQUEST_ATTEMPTS,
          backoffMs: BACKOFF_MS,
          sleep,
          random: Math.random,
          signal: waitEnded,
        });
        if (result.ok) accepted(result.value.approval.code, result.value.reach, result.value.push, result.value.approval.state === "pending");
        else if (!waitEnded.aborted) report(text().approvals.requestFailed(text().delivery.why(result.error)));
        return result.ok;
      })();
      chains.set(body.approval_id, { client, sent });
    },
    resolve(approvalId: string, body: ApprovalResolution): void {
      const chain = chains.get(approvalId);
      if (!chain) return;
      chains.delete(approvalId);
      void (async () => {
        // A request the wait cut short never reached the server: there is nothing to resolve there.
        if (!(await chain.sent)) return;
        const result = await runWithRetry(
          () =>
            chain.client.request("POST", `approvals/${encodeURIComponent(approvalId)}/resolution`, {
              body,
              timeoutMs: REQUEST_TIMEOUT_MS,
              schema: ApprovalAnswer,
            }),
          { maxAttempts: RESOLUTION_ATTEMPTS, backoffMs: BACKOFF_MS, sleep, random: Math.random },
        );
        if (!result.ok) report(text().approvals.resolutionFailed(text().delivery.why(result.error)));
      })();
    },
  };
}
