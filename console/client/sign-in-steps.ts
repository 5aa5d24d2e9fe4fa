/** What the page does with one sign-in answer. No answer at all (a restart's `not implemented`, a
 * timeout) is retried with backoff and never taken for "no token". */
import type { ConsoleAnswer } from "../../server/console/actions.ts";

/** A stored console token is used this long after it was stored, then asked for again. */
export const TOKEN_LIFETIME_MS = 12 * 60 * 60 * 1000;

/** `checking`: asking (or waiting to ask again); `needed`: no data without a token; `refused`: the stored or typed token
 * was wrong; `unanswered`: retries spent; `login_required` and `authority_too_low`: plugin-auth decides. */
export type SignInState = "checking" | "signed_in" | "signed_out" | "needed" | "refused" | "unanswered" | "login_required" | "authority_too_low";

export type SignInReply = { answer: ConsoleAnswer<{ via: string }> } | { unanswered: string };

export const SIGN_IN_RETRY = { attempts: 6, firstMs: 500, maxMs: 8_000 };

/** `retryInMs`: ask again after this long; `token`: keep the presented token, or forget the stored one; `refused`:
 * the flag that a token was refused, so a later page still says why. */
export interface SignInStep {
  state: SignInState;
  retryInMs?: number;
  token?: "keep" | "forget";
  refused?: "set" | "clear";
}

/** `attempt`: earlier attempts with no answer in this round; `refusedBefore`: the flag as stored. Pure. */
export function signInStep(reply: SignInReply, token: string, attempt: number, refusedBefore: boolean, retry = SIGN_IN_RETRY): SignInStep {
  if ("unanswered" in reply) {
    if (attempt + 1 >= retry.attempts) return { state: "unanswered" };
    return { state: "checking", retryInMs: Math.min(retry.firstMs * 2 ** attempt, retry.maxMs) };
  }
  const { answer } = reply;
  if (answer.ok) return { state: "signed_in", ...(token ? { token: "keep" as const } : {}), refused: "clear" };
  if (answer.error === "bad_token") {
    const refused = Boolean(token) || refusedBefore;
    return { state: refused ? "refused" : "needed", token: "forget", ...(token ? { refused: "set" as const } : {}) };
  }
  if (answer.error === "login_required" || answer.error === "authority_too_low") return { state: answer.error };
  // A code the sign-in never answers: not a verdict on the token.
  return signInStep({ unanswered: answer.error }, token, attempt, refusedBefore, retry);
}
