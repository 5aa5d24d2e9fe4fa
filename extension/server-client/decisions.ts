/** The real cause of a failed request, when the server counts as away and back, and which failures need no warning. */

/** What went wrong, as facts each language words, so no English sentence of ours lands inside a Chinese one. */
export type DeliveryFacts =
  | { kind: "timeout"; ms: number }
  | { kind: "network"; request: string; code: string | null; detail: string }
  | { kind: "http"; status: number; serverCode: string | null }
  | { kind: "invalid_answer"; status: number; where: string }
  | { kind: "wrong_event"; named: string; sent: string }
  | { kind: "batch_mismatch" }
  | { kind: "receipt_failed" }
  | { kind: "aborted" }
  | { kind: "internal"; detail: string };

/** What the decisions read of a failed request (a ServerError has it). */
export type Failure = { readonly retryable: boolean; readonly status?: number; readonly code?: string };

export type ServerCause = "no_token" | "token_refused" | "no_answer" | "not_our_server" | "server_error";

/** The real cause of a failed request, or null when it is none of these (a refusal of this request alone). */
export function serverCause(error: Failure, hasToken: boolean): ServerCause | null {
  if (error.status === 401) return hasToken ? "token_refused" : "no_token";
  if (routeMissing(error) || error.code === "invalid_answer") return "not_our_server";
  if (error.status === undefined) return error.retryable ? "no_answer" : null;
  return error.status >= 500 ? "server_error" : null;
}

export interface LinkState {
  phase: "unknown" | "up" | "down";
  /** When the phase began (for `down`: since when the server has not answered). */
  since: number;
}
export const LINK_UNKNOWN: LinkState = { phase: "unknown", since: 0 };

/** `answered`: a 2xx; `failed`: any failure, which may still be an answer (a refusal of this request). */
export type LinkSignal = { kind: "answered" } | { kind: "failed"; error: Failure };

/** A 404 without the server's own code: no such route (a wrong URL, or our server restarting), not a missing event or command. */
const routeMissing = (error: Failure) => error.status === 404 && error.code === "http_404";

/** Whether a failure is the server being away: no answer, a 5xx, or a missing route on a server that answered before (one restarting). */
function outage(error: Failure, phase: LinkState["phase"]): boolean {
  if (error.status === 404) return routeMissing(error) && phase !== "unknown";
  return (error.status === undefined && error.retryable) || (error.status !== undefined && error.status >= 500);
}

/** The next state, and `back` with how long it was down when an outage just ended. */
export function linkStep(state: LinkState, signal: LinkSignal, now: number): { state: LinkState; back?: number } {
  const answered = signal.kind === "answered" || (signal.error.status !== undefined && !routeMissing(signal.error) && !outage(signal.error, state.phase));
  if (answered) {
    if (state.phase === "up") return { state };
    return { state: { phase: "up", since: now }, ...(state.phase === "down" ? { back: now - state.since } : {}) };
  }
  if (!outage(signal.error, state.phase) || state.phase === "down") return { state };
  return { state: { phase: "down", since: now } };
}

/** Failures nobody needs a warning for: the outage the footer shows, a token refusal the client tells once, a runtime the next heartbeat registers. */
export function quietFailure(error: Failure, state: LinkState): boolean {
  if (error.status === 401 || error.code === "session_offline" || error.code === "aborted") return true;
  return state.phase === "down" && outage(error, state.phase);
}
