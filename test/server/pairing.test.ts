/**
 * Pairing through the real plugin on a loopback Koishi: a code is exchanged once for the agent
 * token and the recipient, a used, unknown or expired code gets one answer, guessing is throttled,
 * and the plugin in someone's own Koishi logs the one line to run, in the instance's language.
 */
import { describe, test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { PairAnswer, PAIRING_ALPHABET, PAIRING_TTL_MS, formatPairingCode, normalisePairingCode } from "../../protocol/pairing.ts";
import { captureLog, startKoishi } from "../../harness/koishi.ts";
import { waitUntil } from "../../harness/wait.ts";
import { PAIRING_LIMIT_PER_ADDRESS, PairingCodes, newPairingCode } from "../../server/pairing/codes.ts";
import { TRIAL_QQ } from "../../server/pairing/recipient.ts";

const pair = (baseUrl: string, body: unknown) =>
  fetch(`${baseUrl}/pair`, { method: "POST", body: JSON.stringify(body) }).then(async (r) => ({
    status: r.status,
    body: (await r.json()) as Record<string, unknown>,
    retryAfter: r.headers.get("retry-after"),
  }));

describe("pairing codes", () => {
  test("a code is single use, and expires after its life; only as typed differently it still matches", () => {
    let now = 0;
    const codes = new PairingCodes(() => now);
    const code = codes.issue();
    assert.deepEqual(codes.redeem(formatPairingCode(code).toLowerCase(), "a"), { ok: true }, "dashes and case do not matter");
    assert.deepEqual(codes.redeem(code, "a"), { ok: false, why: "invalid" }, "used up");
    const later = codes.issue();
    now += PAIRING_TTL_MS;
    assert.deepEqual(codes.redeem(later, "b"), { ok: false, why: "invalid" }, "expired");
  });
  test("any other string is refused, and a burst of guesses from one address is throttled while the code stays good for another", () => {
    let now = 0;
    const codes = new PairingCodes(() => now);
    const code = codes.issue();
    fc.assert(
      fc.property(fc.string({ maxLength: 64 }), (guess) => {
        now += 60_000; // a minute between guesses: never throttled
        fc.pre(normalisePairingCode(guess) !== code);
        return !codes.redeem(guess, "guesser").ok;
      }),
      { numRuns: 200 },
    );
    const throttle = new PairingCodes(() => now);
    const real = throttle.issue();
    const answers = Array.from({ length: PAIRING_LIMIT_PER_ADDRESS.burst + 1 }, () => throttle.redeem("WRONG", "10.0.0.9"));
    assert.deepEqual({ ...answers.at(-1), retryAfterSeconds: 0 }, { ok: false, why: "rate_limited", retryAfterSeconds: 0 });
    assert.deepEqual(throttle.redeem(real, "10.0.0.9").ok, false, "the throttled address does not get through, even with the code");
    assert.deepEqual(throttle.redeem(real, "10.0.0.10"), { ok: true });
  });
  test("codes are drawn from the unambiguous alphabet", () => {
    for (let i = 0; i < 200; i++) assert.match(newPairingCode(), new RegExp(`^[${PAIRING_ALPHABET}]{8}$`));
  });
});

test("POST /pair exchanges a code once for the token and the trial recipient; every other code and shape gets its one answer", async (t) => {
  const koishi = await startKoishi({ config: { pairingCode: "K7M2Q9XD" } });
  t.after(() => koishi.stop());
  const first = await pair(koishi.baseUrl, { code: "k7m2-q9xd" });
  assert.equal(first.status, 200, JSON.stringify(first.body));
  assert.deepEqual(PairAnswer.parse(first.body), { token: koishi.token, recipient: { qq: TRIAL_QQ.qq, anon_qq: TRIAL_QQ.anonQq }, chat: false });
  assert.deepEqual(
    [(await pair(koishi.baseUrl, { code: "K7M2Q9XD" })).status, (await pair(koishi.baseUrl, { code: "K7M2Q9XD" })).body],
    [403, { error: "pairing_code_invalid" }],
  );
  assert.equal((await pair(koishi.baseUrl, { code: "" })).status, 400);
  assert.equal((await pair(koishi.baseUrl, { code: "K7M2Q9XD", token: "x" })).status, 400, "unknown keys are refused");
  let last = await pair(koishi.baseUrl, { code: "NOPE" });
  for (let i = 0; i < 10 && last.status !== 429; i++) last = await pair(koishi.baseUrl, { code: "NOPE" });
  assert.deepEqual([last.status, last.body], [429, { error: "rate_limited" }]);
  assert.match(last.retryAfter ?? "", /^\d+$/);
});

for (const [locale, says] of [
  [
    "en-US",
    /^Pair a Pi with this server: in Pi, run \/anon-notify-setup (http:\/\/127\.0\.0\.1:\d+\/api\/agent-notify\/v1\/pair#[2-9A-Z]{4}-[2-9A-Z]{4}) \(the code works once, for 15 minutes/,
  ],
  [
    "zh-CN",
    /^让 Pi 与这个服务端配对：在 Pi 中执行 \/anon-notify-setup (http:\/\/127\.0\.0\.1:\d+\/api\/agent-notify\/v1\/pair#[2-9A-Z]{4}-[2-9A-Z]{4})（配对码只能用一次，15 分钟内有效/,
  ],
] as const) {
  test(`(${locale}) the plugin in its own Koishi logs the one pairing line, and its link pairs`, async (t) => {
    const log = captureLog();
    const koishi = await startKoishi({ locales: [locale] });
    t.after(async () => {
      log.stop();
      await koishi.stop();
    });
    const line = await waitUntil(
      () => log.infos().find((info) => says.test(info)),
      () => `the pairing line: ${log.infos().join("\n")}`,
    );
    const link = new URL(says.exec(line)![1]!);
    const answer = await pair(`${link.origin}${link.pathname.replace(/\/pair$/, "")}`, { code: link.hash.slice(1) });
    assert.equal(answer.status, 200);
    assert.ok(log.infos().some((info) => /127\.0\.0\.1/.test(info) && (locale === "en-US" ? /A Pi paired from/ : /已完成配对/).test(info)));
  });
}
