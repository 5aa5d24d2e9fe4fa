/** The page's sign-in with the console token: `?token=` moves into this tab's `sessionStorage` (never
 * `localStorage`, which every console plugin reads), is presented once per connection, forgotten when refused. */
import { ref, watch } from "vue";
import { router, socket, store } from "@koishijs/client";
import { call, isRetired } from "./call.ts";
import { TOKEN_LIFETIME_MS, signInStep, type SignInReply, type SignInState } from "./sign-in-steps.ts";

const STORAGE_KEY = "anon-notify.console-token";
const REFUSED_KEY = "anon-notify.console-token-refused";

function stored(): string {
  try {
    const { token, until } = JSON.parse(sessionStorage.getItem(STORAGE_KEY) ?? "null") ?? {};
    if (typeof token === "string" && typeof until === "number" && Date.now() < until) return token;
  } catch {
    // Not ours, or from an older page: forgotten below.
  }
  sessionStorage.removeItem(STORAGE_KEY);
  return "";
}

const keep = (token: string) => sessionStorage.setItem(STORAGE_KEY, JSON.stringify({ token, until: Date.now() + TOKEN_LIFETIME_MS }));

export function useSignIn() {
  const state = ref<SignInState>("checking");
  /** Why the last attempt got no answer (state `unanswered`). */
  const why = ref("");
  const fromLink = router.currentRoute.value.query.token;
  if (typeof fromLink === "string" && fromLink) {
    keep(fromLink);
    const { token: _token, ...rest } = router.currentRoute.value.query;
    void router.replace({ query: rest });
  }

  /** Each sign-in round (a connection, a typed token); an answer from an earlier round is dropped. */
  let round = 0;
  let retry: ReturnType<typeof setTimeout> | undefined;

  async function attempt(token: string, mine: number, tries: number): Promise<void> {
    // Not connected: the connection's watcher starts a new round once the socket is back.
    if (!socket.value || isRetired() || mine !== round) return;
    state.value = "checking";
    const reply: SignInReply = await call<{ via: string }>("anon-notify/sign-in", { token }).then(
      (answer): SignInReply => (answer.ok || answer.error !== "disconnected" ? { answer } : { unanswered: answer.error }),
      // The console's own refusals (`not implemented` while this plugin's listener is not back, `timeout`).
      (error: unknown): SignInReply => ({ unanswered: error instanceof Error ? error.message : String(error) }),
    );
    if (mine !== round) return;
    const step = signInStep(reply, token, tries, Boolean(sessionStorage.getItem(REFUSED_KEY)));
    if (step.token === "keep") keep(token);
    if (step.token === "forget") sessionStorage.removeItem(STORAGE_KEY);
    if (step.refused === "set") sessionStorage.setItem(REFUSED_KEY, "1");
    if (step.refused === "clear") sessionStorage.removeItem(REFUSED_KEY);
    why.value = "unanswered" in reply ? reply.unanswered : "";
    state.value = step.state;
    if (step.retryInMs !== undefined) retry = setTimeout(() => void attempt(token, mine, tries + 1), step.retryInMs);
  }

  /** A new round with `token` (the stored one unless typed). */
  function present(token = stored()) {
    clearTimeout(retry);
    void attempt(token, ++round, 0);
  }

  /** Signs this connection out and forgets the token this tab kept; the page then asks for one. */
  async function signOut() {
    clearTimeout(retry);
    round++;
    // Before the server takes the data away, so the watcher below does not sign in again.
    state.value = "signed_out";
    sessionStorage.removeItem(STORAGE_KEY);
    sessionStorage.removeItem(REFUSED_KEY);
    await call("anon-notify/sign-out", {});
  }

  // Once connected, and again whenever the data is taken away (a new token on the server).
  watch(
    () => Boolean(socket.value),
    (connected) => connected && present(),
    { immediate: true },
  );
  watch(
    () => (store as { anonNotify?: unknown }).anonNotify,
    (current, previous) => {
      if (current === null && previous && socket.value && state.value !== "signed_out") present();
    },
  );
  return { state, why, present, signOut };
}
