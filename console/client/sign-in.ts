/**
 * The page's sign-in with the console token (server/console/sign-in.ts): a link's `?token=` is
 * moved out of the address bar into this browser's storage, and presented once per connection
 * (every reconnect reloads the page). A refused token is forgotten, so a new token on the server
 * signs this browser out; the page then asks for the token.
 */
import { ref, watch } from "vue";
import { router, send, socket, store } from "@koishijs/client";
import type { ConsoleAnswer } from "../../server/console/actions.ts";

const STORAGE_KEY = "anon-notify.console-token";
/** Set when a stored token was refused, so the page still says why after the reload a reconnect makes. */
const REFUSED_KEY = "anon-notify.console-token-refused";

/** `checking`: asking the server; `needed`: no data without a token; `refused`: the stored or typed token was wrong; `login_required` and `authority_too_low`: plugin-auth decides. */
export type SignInState = "checking" | "signed_in" | "needed" | "refused" | "login_required" | "authority_too_low";

export function useSignIn() {
  const state = ref<SignInState>("checking");
  const fromLink = router.currentRoute.value.query.token;
  if (typeof fromLink === "string" && fromLink) {
    localStorage.setItem(STORAGE_KEY, fromLink);
    const { token: _token, ...rest } = router.currentRoute.value.query;
    void router.replace({ query: rest });
  }

  async function present(token: string) {
    // Not connected: the connection's watcher presents it once the socket is back.
    if (!socket.value) return;
    state.value = "checking";
    const answer = await (send("anon-notify/sign-in" as never, { token } as never) as unknown as Promise<ConsoleAnswer<{ via: string }> | undefined>).catch(
      () => undefined,
    );
    if (!answer) state.value = "needed";
    else if (answer.ok) {
      if (token) localStorage.setItem(STORAGE_KEY, token);
      sessionStorage.removeItem(REFUSED_KEY);
      state.value = "signed_in";
    } else if (answer.error === "bad_token") {
      localStorage.removeItem(STORAGE_KEY);
      if (token) sessionStorage.setItem(REFUSED_KEY, "1");
      state.value = sessionStorage.getItem(REFUSED_KEY) ? "refused" : "needed";
    } else {
      state.value = answer.error === "authority_too_low" ? "authority_too_low" : "login_required";
    }
  }

  // Once connected, and again whenever the data is taken away (a new token on the server).
  watch(
    () => Boolean(socket.value),
    (connected) => connected && void present(localStorage.getItem(STORAGE_KEY) ?? ""),
    { immediate: true },
  );
  watch(
    () => (store as { anonNotify?: unknown }).anonNotify,
    (current, previous) => {
      if (current === null && previous && socket.value) void present(localStorage.getItem(STORAGE_KEY) ?? "");
    },
  );
  return { state, present };
}
