/** The host's decisions, pure: what one claimed start job becomes. */
import type { StartRefusal } from "../protocol/queue.ts";
import type { ProjectVerdict } from "./path-rules.ts";

export type StartDecision =
  /** Journaled before: started (or begun) by an earlier claim; ACK again, start nothing. */
  { kind: "ack_again" } | { kind: "refuse"; refusal: StartRefusal } | { kind: "start"; cwd: string };

export interface StartFacts {
  journaled: boolean;
  project: ProjectVerdict;
  piFound: boolean;
  running: number;
  maxSessions: number;
}

/** The journal first: a job that may have started once never starts again, whatever else changed since. */
export function decideStart(facts: StartFacts): StartDecision {
  if (facts.journaled) return { kind: "ack_again" };
  if (facts.project.kind === "refuse") return { kind: "refuse", refusal: facts.project.refusal };
  if (!facts.piFound) return { kind: "refuse", refusal: "pi_not_found" };
  if (facts.running >= facts.maxSessions) return { kind: "refuse", refusal: "too_many_sessions" };
  return { kind: "start", cwd: facts.project.cwd };
}
