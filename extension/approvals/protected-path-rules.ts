/** Protected paths, where a write runs code later or a read hands over a credential: a tool call naming one always asks. */
import { isAbsolute, relative, resolve } from "node:path";

const PROTECTED_NAMES =
  /(^|\/)(\.ssh|\.pi|\.gnupg|\.gitconfig|\.config\/git|\.config\/fish|\.git\/hooks|\.git\/config|\.bashrc|\.bash_profile|\.bash_login|\.bash_logout|\.bash_aliases|\.profile|\.zshrc|\.zprofile|\.zshenv|\.zlogin|\.zlogout|\.kshrc|\.mkshrc|\.cshrc|\.tcshrc|\.inputrc|\.netrc|\.git-credentials|\.npmrc|\.pypirc|\.aws|\.docker|\.kube|\.config\/gh|\.config\/gcloud)(\/|$)/;
/** The same names in free text (a command line), where any quote, blank or `=` may stand before them. */
const PROTECTED_IN_TEXT = new RegExp(PROTECTED_NAMES.source.replace("(^|\\/)", "(^|[\\s/'\"=:~`(])").replace("(\\/|$)", "(?=[\\s/'\"`;&|)<>]|$)"));

/** `tempDirs` are not "the project" but not guarded either; `roots`: the extension's own data folder and token files. */
export interface CallPlace {
  cwd: string;
  home: string;
  tempDirs: readonly string[];
  roots?: readonly string[];
}

export const within = (root: string, target: string) => {
  const rel = relative(root, target);
  return rel === "" || (!rel.startsWith("..") && !isAbsolute(rel));
};

export const expandHome = (path: string, home: string) => (path === "~" ? home : path.startsWith("~/") ? home + path.slice(1) : path);

export function isProtectedPath(path: string, place: CallPlace): boolean {
  const trimmed = path.trim();
  if (trimmed === "") return false;
  const expanded = expandHome(trimmed, place.home);
  const target = resolve(place.cwd, expanded);
  return PROTECTED_NAMES.test(target) || PROTECTED_NAMES.test(expanded) || ownRoots(place).some((root) => within(root, target));
}

export function mentionsProtected(text: string, place: CallPlace): boolean {
  return PROTECTED_IN_TEXT.test(text) || ownRoots(place).some((root) => text.includes(root));
}

/** The extension's own paths, less any folder that holds the project itself (else every call in it would ask). */
const ownRoots = (place: CallPlace) => (place.roots ?? []).filter((root) => root !== "" && !within(resolve(root), place.cwd)).map((root) => resolve(root));

export function pathArguments(input: Record<string, unknown>): string[] {
  const out: string[] = [];
  for (const [key, value] of Object.entries(input)) {
    if (!/path|file|dir|cwd|target|dest|source/i.test(key)) continue;
    if (typeof value === "string") out.push(value);
    else if (Array.isArray(value)) for (const item of value) if (typeof item === "string") out.push(item);
  }
  return out;
}
