/** A name an agent chose (project, model, tool, task) as a row shows it: one line, hidden characters
 * written out as in common/command-text.ts, and whether its letters mix scripts the way look-alikes do. */
import { visibleControls } from "./command-text.ts";

/** Scripts a name's letters are told apart by. A letter in none of them counts as one more script
 * of its own ("other"), so a name in an unlisted script is one script, and mixed with Latin is two. */
const SCRIPTS = "Latin Greek Cyrillic Armenian Hebrew Arabic Devanagari Bengali Tamil Thai Georgian Cherokee Ethiopic Hangul Hiragana Katakana Bopomofo Han"
  .split(" ")
  .map((name) => ({ name, pattern: new RegExp(`\\p{Script=${name}}`, "u") }));

/** Script sets a name may combine and still read as one writing system (UTS #39, "highly restrictive"). */
const ALLOWED_MIXES = [
  ["Latin", "Han", "Hiragana", "Katakana"],
  ["Latin", "Han", "Bopomofo"],
  ["Latin", "Han", "Hangul"],
].map((set) => new Set(set));

function scriptsOf(text: string): Set<string> {
  const scripts = new Set<string>();
  for (const char of text) {
    if (!/\p{L}/u.test(char)) continue;
    scripts.add(SCRIPTS.find(({ pattern }) => pattern.test(char))?.name ?? "other");
  }
  return scripts;
}

/** Whether the letters of `text` come from scripts no single writing system combines (`ѕhop`: Cyrillic and Latin). */
export function mixesScripts(text: string): boolean {
  const scripts = scriptsOf(text);
  if (scripts.size <= 1) return false;
  return !ALLOWED_MIXES.some((allowed) => [...scripts].every((script) => allowed.has(script)));
}

/** The one fold for every agent-chosen field shown as a row or a name: one line, and whether listings flag it (`ѕhop (mixed scripts)`). */
export function shownName(name: string): { text: string; mixedScripts: boolean } {
  return { text: visibleControls(name), mixedScripts: mixesScripts(name) };
}

/** Whether a name a person typed refers to `name`: equal ignoring case, but only where case maps both
 * ways (`K` and `k`, never the Kelvin sign `K` and `k`), so no look-alike is ever the same name. */
export function sameName(typed: string, name: string): boolean {
  return typed.toLowerCase() === name.toLowerCase() && typed.toUpperCase() === name.toUpperCase();
}
