import { z } from "zod";
import { ApprovalAnswer, ApprovalReach, type ApprovalRequest, type ApprovalResolution } from "../../protocol/approvals.ts";
import type { ApiClient } from "../server-client/http-client.ts";
import type { Messages } from "../texts/messages.ts";
import { realSleep, runWithRetry, type Sleep } from "../server-client/retry.ts";

const REQUEST_TIMEOUT_MS = 10_000;
/** A server before `reach` answers without it: how the owner is reached is then unknown. */
const RequestAnswer = ApprovalAnswer.extend({ reach: ApprovalReach.optional(), push: z.string().nullable().optional() });
const BACKOFF_MS = 500;
/** While the call waits the request is tried again and again; the wait's end stops it. */
const REQUEST_ATTEMPTS = 1_000;
const RESOLUTION_ATTEMPTS = 8;

export interface Outgoing {
  /** Starts sending the request; `waitEnded` aborts its retries. `accepted` gets the server's code and how it reaches the owner. */
  request(
    client: ApiClient,
    body: ApprovalRequest,
    waitEnded: AbortSignal,
    accepted: (code: string, reach: ApprovalReach | "unknown", push: string | null) => void,
  ): void;
  /** Sends the resolution after the request, if the request ever reached the server. */
  resolve(approvalId: string, body: ApprovalResolution): void;
}

export function createOutgoing(report: (message: string) => void, text: () => Messages, sleep: Sleep = realSleep): Outgoing {
  const chains = new Map<string, { client: ApiClient; sent: Promise<boolean> }>();

  return {
    request(client, body, waitEnded, accepted) {
      const post = (payload: ApprovalRequest) =>
        runWithRetry(() => client.request("POST", "approvals", { body: payload, timeoutMs: REQUEST_TIMEOUT_MS, schema: RequestAnswer }), {
          maxAttempts: REQUEST_ATTEMPTS,
          backoffMs: BACKOFF_MS,
          sleep,
          random: Math.random,
          signal: waitEnded,
        });
      const sent = (async () => {
        let result = await post(body);
        // A server older than `action_code` refuses the field (its request shape is strict): the
        // same request without it, which that server shows with the session's own label as before.
        if (!result.ok && result.error.status === 400 && body.action_code !== undefined && !waitEnded.aborted) {
          const { action_code: _, ...older } = body;
          result = await post(older);
        }
        if (result.ok) accepted(result.value.approval.code, result.value.reach ?? "unknown", result.value.push ?? null);
        else if (!waitEnded.aborted) report(text().approvals.requestFailed(text().delivery.why(result.error)));
        return result.ok;
      })();
      chains.set(body.approval_id, { client, sent });
    },
    resolve(approvalId, body) {
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
