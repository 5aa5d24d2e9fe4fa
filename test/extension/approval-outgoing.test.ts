/** The approval request beside the agent (extension/approvals/outgoing.ts): every field sent once, and a
 * refusal reported, never answered by sending less (both sides ship together). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { createOutgoing } from "../../extension/approvals/outgoing.ts";
import type { ApiClient } from "../../extension/server-client/http-client.ts";
import { classifyHttpFailure } from "../../extension/server-client/retry.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { ApprovalRequest } from "../../protocol/approvals.ts";
import { approvalRequestOf } from "../../harness/agent-api.ts";

/** A server taking requests of `shape`, answering as `POST /approvals` does; every body it was sent is kept. */
function server(shape: { safeParse(value: unknown): { success: boolean } }) {
  const bodies: Record<string, unknown>[] = [];
  const client: ApiClient = {
    async request(_method, _path, options) {
      const body = options.body as Record<string, unknown>;
      bodies.push(body);
      if (!shape.safeParse(body).success) throw classifyHttpFailure(400, {}, Date.now(), "invalid_request");
      return { approval: { code: "ACDEF" }, reach: "sent" } as never;
    },
  };
  return { client, bodies };
}

/** Asks once; resolves with the code the server gave, or with what was reported instead. */
async function ask(client: ApiClient, request = approvalRequestOf({ action_code: "disk-write" })): Promise<{ code: string | null; reports: string[] }> {
  const reports: string[] = [];
  return new Promise((resolve) => {
    const outgoing = createOutgoing(
      (message) => {
        reports.push(message);
        resolve({ code: null, reports });
      },
      () => messagesFor("en-US"),
      async () => {},
    );
    outgoing.request(client, request, new AbortController().signal, (code) => resolve({ code, reports }));
  });
}

const full = () => approvalRequestOf({ action_code: "disk-write", agent_uid: 1000, matched: [{ rule: "rm-rf", at: "rm -rf build" }] });
const fields = (body: Record<string, unknown>) => ["action_code", "matched", "agent_uid"].filter((key) => body[key] !== undefined);

test("the server gets the whole request once, the OS user id and every matched rule on it", async () => {
  const current = server(ApprovalRequest);
  assert.equal((await ask(current.client, full())).code, "ACDEF");
  assert.deepEqual(current.bodies.map(fields), [["action_code", "matched", "agent_uid"]]);
});

test("a server refusing the request is reported in words; the request is never sent again without fields", async () => {
  const strict = server(ApprovalRequest.omit({ agent_uid: true }).strict());
  const { code, reports } = await ask(strict.client, full());
  assert.equal(code, null);
  assert.equal(strict.bodies.length, 1, "sent once");
  assert.equal(reports.length, 1);
  assert.match(reports[0]!, /approval request/i);
});
