/** How fast approval requests reach the owner: at most `cap` a window across sessions; past it requests
 * are held and one digest says how many wait. */

export type PaceLimit = { cap: number; windowMs: number };

/** Whether the next request goes out on its own, given when the recent ones went (ms). */
export function decideRequestPace(sentAtMs: readonly number[], nowMs: number, limit: PaceLimit): "send" | "hold" {
  return sentAtMs.filter((at) => nowMs - at < limit.windowMs).length < limit.cap ? "send" : "hold";
}

/** The held requests still waiting, those a digest already counted, and when the last digest went (null before the first). */
export interface DigestFacts {
  waiting: readonly string[];
  told: ReadonlySet<string>;
  lastAtMs: number | null;
  nowMs: number;
}

/** A digest when a waiting request is not counted yet: now, or once the window since the last one is over. */
export function decideDigest(facts: DigestFacts, limit: PaceLimit): { kind: "none" } | { kind: "wait"; untilMs: number } | { kind: "send"; count: number } {
  if (!facts.waiting.some((id) => !facts.told.has(id))) return { kind: "none" };
  if (facts.lastAtMs !== null && facts.nowMs - facts.lastAtMs < limit.windowMs) return { kind: "wait", untilMs: facts.lastAtMs + limit.windowMs };
  return { kind: "send", count: facts.waiting.length };
}
