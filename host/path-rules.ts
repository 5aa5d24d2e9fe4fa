/** Which folder a start job's project names (one directly under an allowed root, inside it after every symlink), and what the job becomes. */
import { isAbsolute, relative, sep } from "node:path";
import type { StartRefusal } from "../protocol/queue.ts";

/** One allowed root as the host resolved it at start: as given and as `realpath` found it. */
export type Root = { given: string; real: string };

/** What the edge found for the name under one root: the real path (null when nothing is there) and whether it is a folder. */
export type Found = { root: Root; real: string | null; isDirectory: boolean };

export type ProjectVerdict = { kind: "ok"; cwd: string; root: Root } | { kind: "refuse"; refusal: StartRefusal };

/** A name that could never be one folder under a root (`..`, a path, a hidden folder, a NUL) is refused before the disk is asked. */
export function nameProblem(name: string): StartRefusal | undefined {
  if (name === "" || name.startsWith(".") || /[\\/\0]/.test(name)) return "root_not_allowed";
  return undefined;
}

/** Whether `real` lies strictly inside `root` (both already real paths). */
export function inside(real: string, root: string): boolean {
  const rel = relative(root, real);
  return rel !== "" && !rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel);
}

/** The first root whose entry of that name is a folder really inside it; only a link leading out is `root_not_allowed`, nothing `unknown_project`. */
export function judgeProject(name: string, found: readonly Found[]): ProjectVerdict {
  const problem = nameProblem(name);
  if (problem) return { kind: "refuse", refusal: problem };
  let escaped = false;
  for (const entry of found) {
    if (entry.real === null) continue;
    if (!inside(entry.real, entry.root.real)) {
      escaped = true;
      continue;
    }
    if (entry.isDirectory) return { kind: "ok", cwd: entry.real, root: entry.root };
  }
  return { kind: "refuse", refusal: escaped ? "root_not_allowed" : "unknown_project" };
}

export type StartDecision =
  /** Journaled before: started (or begun) by an earlier claim; ACK again, start nothing. */
  { kind: "ack_again" } | { kind: "refuse"; refusal: StartRefusal } | { kind: "start"; cwd: string };

/** The journal first: a job that may have started once never starts again, whatever else changed since. */
export function decideStart(facts: { journaled: boolean; project: ProjectVerdict; piFound: boolean; running: number; maxSessions: number }): StartDecision {
  if (facts.journaled) return { kind: "ack_again" };
  if (facts.project.kind === "refuse") return { kind: "refuse", refusal: facts.project.refusal };
  if (!facts.piFound) return { kind: "refuse", refusal: "pi_not_found" };
  if (facts.running >= facts.maxSessions) return { kind: "refuse", refusal: "too_many_sessions" };
  return { kind: "start", cwd: facts.project.cwd };
}
