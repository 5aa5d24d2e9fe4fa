/** A refused send's cause as a receipt keeps it: the platform's code first, never cut off by the message text. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { failureCause } from "../../server/handover/failure-cause.ts";

const shaped = (message: string, facts: Record<string, unknown>) => Object.assign(new Error(message), facts);

test("failure causes: retcode, HTTP status and codes come first; the adapter's words after; long ones cut whole", () => {
  const oneBot = shaped(`Error with request send_private_msg, args: {"message":"${"长".repeat(500)}"}, retcode: 1200`, {
    code: 1200,
    url: "send_private_msg",
    args: {},
  });
  const table: [unknown, string][] = [
    [oneBot, "retcode 1200 (send_private_msg)"],
    [shaped("Request failed", { response: { status: 403 } }), "HTTP 403: Request failed"],
    [shaped("connect ECONNREFUSED 127.0.0.1:9", { code: "ECONNREFUSED" }), "code ECONNREFUSED: connect ECONNREFUSED 127.0.0.1:9"],
    [
      Object.assign(new Error(""), { errors: [new Error('[403] {"message":"Cannot send messages to this user","code":50007}')] }),
      '[403] {"message":"Cannot send messages to this user","code":50007}',
    ],
    [new Error("Telegram API error 403. Forbidden: bot was blocked by the user"), "Telegram API error 403. Forbidden: bot was blocked by the user"],
    ["platform down", "platform down"],
  ];
  for (const [error, expected] of table) assert.equal(failureCause(error, 300), expected);

  const long = failureCause(shaped("😀".repeat(400), { response: { status: 500 } }), 300);
  assert.equal([...long].length, 300);
  assert.match(long, /^HTTP 500: 😀+…$/u, "cut on a character, marked");
});
