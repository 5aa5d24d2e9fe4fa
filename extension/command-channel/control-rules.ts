/** Which outcomes the server accepts for a control kind, whether a claimed command is applied or only
 * re-ACKed, and what a stop's ACK says of the run. */
import { redactSecrets } from "../../common/redact.ts";
import { OUTCOMES, StoppedRun, type CommandOutcome } from "../../protocol/queue.ts";
import { LIMITS } from "../../protocol/wire.ts";
import { truncate } from "../notices/notice-rules.ts";
import type { RunFacts } from "../../lifecycle.ts";

export function allowedOutcome(kind: string, outcome: CommandOutcome): CommandOutcome {
  const allowed = (OUTCOMES as Readonly<Record<string, readonly CommandOutcome[]>>)[kind];
  return allowed?.includes(outcome) ? outcome : "unknown";
}

/** What applying a control command did, as journaled and ACKed. */
export type Applied = { outcome: CommandOutcome; run?: StoppedRun };

/** A control command is applied once: one journaled with its outcome is only ACKed again with that outcome. */
export function controlStep(journaled: { has: boolean } & Partial<Applied>): { apply: true } | ({ apply: false } & Applied) {
  if (!journaled.has || journaled.outcome === undefined) return { apply: true };
  return { apply: false, outcome: journaled.outcome, ...(journaled.run ? { run: journaled.run } : {}) };
}

/** The run a stop aborts, as its ACK carries it: the prompt masked before it is cut (no secret half-kept), the start only when known. */
export function stoppedRun(run: Pick<RunFacts, "startedAt" | "startKnown" | "task"> | undefined, maxTaskChars: number): StoppedRun | undefined {
  if (!run) return undefined;
  const parsed = StoppedRun.safeParse({
    ...(run.startKnown ? { started_at: new Date(run.startedAt).toISOString() } : {}),
    task: truncate(redactSecrets(run.task), Math.min(maxTaskChars, LIMITS.taskChars)),
  });
  return parsed.success ? parsed.data : undefined;
}
