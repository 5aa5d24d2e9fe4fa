/** The host's projects on disk: the allowed roots resolved once, the folders under them, and one project located by name. */
import { readdirSync, realpathSync, statSync } from "node:fs";
import { join, resolve } from "node:path";
import { HOST_PROJECTS_MAX } from "../protocol/hosts.ts";
import { type Found, judgeProject, nameProblem, type ProjectVerdict, type Root } from "./path-rules.ts";

/** Each `--root`, made absolute and real; a root that is not a folder is an error the host starts with. */
export function resolveRoots(given: readonly string[]): Root[] {
  return given.map((path) => {
    const absolute = resolve(path);
    const real = realpathSync(absolute);
    if (!statSync(real).isDirectory()) throw new Error(`--root ${path} is not a folder`);
    return { given: absolute, real };
  });
}

function find(root: Root, name: string): Found {
  try {
    const real = realpathSync(join(root.real, name));
    return { root, real, isDirectory: statSync(real).isDirectory() };
  } catch {
    return { root, real: null, isDirectory: false };
  }
}

/** Where `name` is, judged by path-rules.ts from what the disk says now (a link may have changed since the listing). */
export function locateProject(name: string, roots: readonly Root[]): ProjectVerdict {
  return judgeProject(name, nameProblem(name) ? [] : roots.map((root) => find(root, name)));
}

/** The folders directly under the roots that a start may name (links leading out left out), sorted, capped. */
export function listProjects(roots: readonly Root[]): { name: string; root: string }[] {
  const projects: { name: string; root: string }[] = [];
  const seen = new Set<string>();
  for (const root of roots) {
    for (const entry of readdirSync(root.real, { withFileTypes: true })) {
      if (seen.has(entry.name) || locateProject(entry.name, [root]).kind !== "ok") continue;
      seen.add(entry.name);
      projects.push({ name: entry.name, root: root.given });
    }
  }
  return projects.sort((a, b) => a.name.localeCompare(b.name)).slice(0, HOST_PROJECTS_MAX);
}
