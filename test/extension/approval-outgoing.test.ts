/**
 * The approval request beside the agent (extension/approvals/outgoing.ts) against servers of three ages,
 * and a current one refusing a bad `matched`: the OS user id is dropped only for a server that lacks it.
 */
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

test("a server that knows action_code gets it once; an older one refuses it and gets the same request without it", async () => {
  const current = server(ApprovalRequest);
  assert.equal((await ask(current.client)).code, "ACDEF");
  assert.deepEqual(
    current.bodies.map((body) => body.action_code),
    ["disk-write"],
  );

  const older = server(ApprovalRequest.omit({ action_code: true }));
  const { code, reports } = await ask(older.client);
  assert.equal(code, "ACDEF", "the older server took the request");
  assert.deepEqual(
    older.bodies.map((body) => body.action_code),
    ["disk-write", undefined],
  );
  assert.equal(older.bodies[1]!.approval_id, older.bodies[0]!.approval_id, "the same request");
  assert.deepEqual(reports, [], "nothing to warn about");
});

const full = () => approvalRequestOf({ action_code: "disk-write", agent_uid: 1000, matched: [{ rule: "rm-rf", at: "rm -rf build" }] });
const fields = (body: Record<string, unknown>) => ["action_code", "matched", "agent_uid"].filter((key) => body[key] !== undefined);

test("a server older than matched and agent_uid gets the request without the display fields, then without the uid", async () => {
  const current = server(ApprovalRequest);
  await ask(current.client, full());
  assert.deepEqual(current.bodies.map(fields), [["action_code", "matched", "agent_uid"]]);

  const display = server(ApprovalRequest.omit({ action_code: true, matched: true }));
  assert.equal((await ask(display.client, full())).code, "ACDEF");
  assert.deepEqual(display.bodies.map(fields), [["action_code", "matched", "agent_uid"], ["agent_uid"]], "the uid kept where the server knows it");

  const oldest = server(ApprovalRequest.omit({ action_code: true, matched: true, agent_uid: true }));
  assert.equal((await ask(oldest.client, full())).code, "ACDEF");
  assert.deepEqual(oldest.bodies.map(fields), [["action_code", "matched", "agent_uid"], ["agent_uid"], []]);
});

test("a current server refusing a bad matched takes the request with agent_uid still on it", async () => {
  const current = server(ApprovalRequest);
  const request = { ...full(), matched: [{ rule: "Not A Rule Id", at: "rm -rf build" }] };
  assert.equal((await ask(current.client, request)).code, "ACDEF");
  assert.deepEqual(current.bodies.map(fields), [["action_code", "matched", "agent_uid"], ["agent_uid"]]);
});
