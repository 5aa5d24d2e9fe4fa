/**
 * The page's reading of one sign-in attempt (console/client/sign-in-steps.ts), as a table: a value
 * decides; no answer (the console's `not implemented` while this plugin's listener is not back
 * after a restart, a timeout, no connection) is asked again with backoff and never taken for "no
 * token"; only when the retries are spent does the page say so.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { SIGN_IN_RETRY, signInStep, type SignInReply, type SignInStep } from "../../console/client/sign-in-steps.ts";

const ok: SignInReply = { answer: { ok: true, value: { via: "token" } } };
const badToken: SignInReply = { answer: { ok: false, error: "bad_token" } };
const notImplemented: SignInReply = { unanswered: "not implemented" };

test("one sign-in attempt: what the page shows next, what it keeps, and when it asks again", () => {
  const last = SIGN_IN_RETRY.attempts - 1;
  const cases: [string, Parameters<typeof signInStep>, SignInStep][] = [
    ["signed in: the token kept, the refusal flag cleared", [ok, "t0k", 0, true], { state: "signed_in", token: "keep", refused: "clear" }],
    ["signed in without a token (open to all, plugin-auth)", [ok, "", 0, false], { state: "signed_in", refused: "clear" }],
    ["a refused token is forgotten and the page says it was refused", [badToken, "t0k", 0, false], { state: "refused", token: "forget", refused: "set" }],
    ["no token yet: the page asks for one", [badToken, "", 0, false], { state: "needed", token: "forget" }],
    ["no token, but one was refused before: still says why", [badToken, "", 0, true], { state: "refused", token: "forget" }],
    ["plugin-auth decides", [{ answer: { ok: false, error: "login_required" } }, "", 0, false], { state: "login_required" }],
    ["the listener not back yet: asked again soon, still checking, the token kept", [notImplemented, "t0k", 0, false], { state: "checking", retryInMs: 500 }],
    ["backoff doubles", [notImplemented, "t0k", 2, false], { state: "checking", retryInMs: 2_000 }],
    ["backoff is capped", [{ unanswered: "timeout" }, "t0k", last - 1, false], { state: "checking", retryInMs: SIGN_IN_RETRY.maxMs }],
    ["retries spent: the page says the server did not answer", [{ unanswered: "disconnected" }, "t0k", last, false], { state: "unanswered" }],
    [
      "a code the sign-in never answers is no verdict on the token",
      [{ answer: { ok: false, error: "not_ready" } }, "t0k", 0, false],
      { state: "checking", retryInMs: 500 },
    ],
  ];
  for (const [why, args, expected] of cases) assert.deepEqual(signInStep(...args), expected, why);
});

test("the retries are bounded: an unanswered sign-in is said within the attempts, never a token form", () => {
  let waited = 0;
  let attempt = 0;
  for (;;) {
    const step = signInStep(notImplemented, "t0k", attempt, false);
    if (step.state !== "checking") {
      assert.equal(step.state, "unanswered");
      break;
    }
    waited += step.retryInMs!;
    attempt++;
  }
  assert.equal(attempt + 1, SIGN_IN_RETRY.attempts);
  assert.equal(waited, 500 + 1_000 + 2_000 + 4_000 + 8_000);
});
