/** Whether the operator API may decide an approval: its token is a file an agent running as the server's
 * user could read, so it is opt-in and refused for a Pi that could reach it. */
import type { ErrorCode } from "../../protocol/wire.ts";

export interface OperatorDecisionFacts {
  /** The operator opted in (`approvalOperatorDecisions`). */
  optedIn: boolean;
  /** The server's own OS user id (it owns the token file); undefined where there is none. */
  serverUid: number | undefined;
  /** The OS user id the asking Pi said it runs as; null when it did not say. */
  agentUid: number | null;
}

/**
 * Undefined when the decision may go through; else why not. The token file is the server's user's,
 * and root reads every file, so a Pi that says it runs as either could have decided this itself.
 * A Pi that does not say (an older extension, no uids on the platform) cannot be told apart: the
 * opt-in is the operator's word that it runs as another user.
 */
export function operatorDecisionRefusal(facts: OperatorDecisionFacts): ErrorCode | undefined {
  if (!facts.optedIn) return "operator_decisions_off";
  if (facts.agentUid !== null && (facts.agentUid === 0 || facts.agentUid === facts.serverUid)) return "operator_token_reachable";
  return undefined;
}
