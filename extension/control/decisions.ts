/** The control channel's pure decision: which outcomes the server accepts for a control kind. */
import { OUTCOMES, type CommandOutcome } from "../../protocol/queue.ts";

/** An outcome the server accepts for this kind; anything else becomes `unknown`. */
export function allowedOutcome(kind: string, outcome: CommandOutcome): CommandOutcome {
  const allowed = (OUTCOMES as Readonly<Record<string, readonly CommandOutcome[]>>)[kind];
  return allowed?.includes(outcome) ? outcome : "unknown";
}
