/** The control channel's pure decisions: which outcomes the server accepts for a kind, and whether a claimed command is applied or only ACKed again. */
import { OUTCOMES, type CommandOutcome } from "../../protocol/queue.ts";

/** An outcome the server accepts for this kind; anything else becomes `unknown`. */
export function allowedOutcome(kind: string, outcome: CommandOutcome): CommandOutcome {
  const allowed = (OUTCOMES as Readonly<Record<string, readonly CommandOutcome[]>>)[kind];
  return allowed?.includes(outcome) ? outcome : "unknown";
}

/**
 * A control command is applied once: one the journal holds with its outcome (a lost ACK, a lease
 * that came back) is only ACKed again with that outcome; anything else is applied.
 */
export function controlStep(journaled: { has: boolean; outcome: CommandOutcome | undefined }): { apply: true } | { apply: false; outcome: CommandOutcome } {
  return journaled.has && journaled.outcome !== undefined ? { apply: false, outcome: journaled.outcome } : { apply: true };
}
