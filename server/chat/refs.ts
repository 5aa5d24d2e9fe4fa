/** Short references to online sessions for people on a phone (`#1`, an id prefix, a project name); an
 * ambiguous reference is refused with its candidates, never guessed. */
import { sameName } from "../../common/shown-name.ts";
import type { SessionProjection } from "../../protocol/sessions.ts";

export const MIN_PREFIX = 4;

export type NumberedSession = { number: number; session: SessionProjection };

export type Resolution =
  | { kind: "found"; session: SessionProjection; number: number }
  | { kind: "none" }
  | { kind: "ambiguous"; candidates: NumberedSession[] };

export function resolveRef(ref: string, sessions: readonly NumberedSession[]): Resolution {
  const text = ref.trim();
  const numbered = /^#?(\d+)$/.exec(text);
  const pick = (matches: NumberedSession[]): Resolution => {
    if (matches.length === 1) return { kind: "found", session: matches[0]!.session, number: matches[0]!.number };
    return matches.length === 0 ? { kind: "none" } : { kind: "ambiguous", candidates: matches };
  };
  if (numbered) return pick(sessions.filter((s) => s.number === Number(numbered[1])));
  const exact = sessions.filter((s) => s.session.session_id === text);
  if (exact.length > 0) return pick(exact);
  const lower = text.toLowerCase();
  if (lower.length >= MIN_PREFIX) {
    const prefixed = sessions.filter((s) => s.session.session_id.toLowerCase().startsWith(lower));
    if (prefixed.length > 0) return pick(prefixed);
  }
  // Never a look-alike: `ѕhop` (Cyrillic) or a name that only lowercases to this one is another name.
  return pick(sessions.filter((s) => sameName(text, s.session.project)));
}

/** The numbers given so far; one instance per plugin, in memory (a restart numbers afresh). */
export class SessionNumbers {
  readonly #numbers = new Map<string, number>();

  /** Numbers `online` (most recently seen first, as the registry lists them), ordered by number. */
  number(online: readonly SessionProjection[]): NumberedSession[] {
    const ids = new Set(online.map((s) => s.session_id));
    for (const id of [...this.#numbers.keys()]) if (!ids.has(id)) this.#numbers.delete(id);
    const taken = new Set(this.#numbers.values());
    // The oldest-seen session takes the lowest free number, so numbers follow arrival.
    for (const session of [...online].reverse()) {
      if (this.#numbers.has(session.session_id)) continue;
      let next = 1;
      while (taken.has(next)) next++;
      taken.add(next);
      this.#numbers.set(session.session_id, next);
    }
    return online.map((session) => ({ number: this.#numbers.get(session.session_id)!, session })).sort((a, b) => a.number - b.number);
  }
}
