/** The buttons' pure parts: ids that fit Telegram and name exactly one approval, the labels, the flat command menu. */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import type { Universal } from "koishi";
import { approvalButtons, approvalTag, buttonId, parseButtonId, type ButtonAnswer } from "../../server/approvals/buttons.ts";
import { voiceOf } from "../../server/approvals/message-rules.ts";
import { withFlatCommands } from "../../server/chat/native-commands.ts";
import { sayIn, zh } from "./say.ts";

const code = fc.stringMatching(/^[A-Z]{5}$/);
const approvalId = fc.stringMatching(/^[A-Za-z0-9._:-]{1,128}$/);
const answer: fc.Arbitrary<ButtonAnswer> = fc.oneof(
  fc.constant({ decision: "rejected", minutes: null } as const),
  fc.constant({ decision: "approved", minutes: null } as const),
  fc.integer({ min: 1, max: 9999 }).map((minutes) => ({ decision: "approved", minutes }) as const),
);

test("a button id fits Telegram's 64 bytes and reads back as the answer, code and approval it was made for", () => {
  fc.assert(
    fc.property(approvalId, code, answer, (id, c, a) => {
      const made = buttonId({ approval_id: id, code: c }, a);
      assert.ok(Buffer.byteLength(made) <= 64, made);
      assert.deepEqual(parseButtonId(made), { code: c, tag: approvalTag(id), answer: a });
    }),
  );
});

test("an id that is not one of ours, or is malformed, answers nothing", () => {
  for (const id of [
    "",
    "an:y:ABCDE",
    "an:y:abcde:12345678",
    "an:x:ABCDE:12345678",
    "an:g0:ABCDE:12345678",
    "an:g:ABCDE:12345678",
    "an:y:ABCDE:1234567g",
    " an:y:ABCDE:12345678",
    "an:y:ABCDE:12345678 ",
  ])
    assert.equal(parseButtonId(id), null, id);
  // Any other text (a Discord custom id of another plugin, say) is someone else's.
  fc.assert(fc.property(fc.string(), (id) => assert.equal(parseButtonId(id), null)));
});

test("two approvals that share a code get different tags, so an old button never answers the newer one", () => {
  assert.notEqual(approvalTag("ap-1"), approvalTag("ap-2"));
});

test("Approve and Deny always; Approve for N minutes only where the server may grant, in the voice's language", () => {
  const record = { approval_id: "ap-1", code: "KXMTR" };
  const labels = (grantable: boolean, locale = zh, minutes = 30) => approvalButtons({ ...record, grantable }, voiceOf(locale), minutes).map((b) => b.label);
  assert.deepEqual(labels(false), ["批准", "拒绝"]);
  assert.deepEqual(labels(true), ["批准", "拒绝", "批准并授权 30 分钟"]);
  assert.deepEqual(labels(true, sayIn("en-US"), 15), ["Approve", "Deny", "Approve for 15 min"]);
  assert.deepEqual(labels(true, zh, 0), ["批准", "拒绝"]);
});

test("the flat menu adds each child of the group under its flat name and leaves the rest as it was", () => {
  const child = (name: string): Universal.Command => ({ name, description: { "": name }, arguments: [], options: [], children: [] });
  const group = { ...child("anon"), children: [child("anon.sessions"), child("anon.approve")] };
  const flat = withFlatCommands([child("help"), group], "anon");
  assert.deepEqual(
    flat.map((c) => c.name),
    ["help", "anon", "anon_sessions", "anon_approve"],
  );
  assert.deepEqual(flat[2]!.description, { "": "anon.sessions" });
  assert.deepEqual(withFlatCommands([child("help")], "anon"), [child("help")]);
});
