/**
 * Whether an approval may be decided through the operator API, purely. Its token is a file on the
 * server's machine: an agent running as the server's OS user can read it and approve its own call,
 * so such decisions are an opt-in, and even then refused for a Pi that could reach the token.
 */
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
