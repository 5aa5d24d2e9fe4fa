/** `PUT /operator/triggers/{name}/keys`: the owner maps a key to a session by hand; the key's next delivery goes to it. */
import assert from "node:assert/strict";
import { createHmac, randomUUID } from "node:crypto";
import test from "node:test";
import { fetch } from "undici";
import { call, OPERATOR_TOKEN, onlineServer } from "../../harness/agent-api.ts";
import { waitUntil } from "../../harness/wait.ts";

const SECRET = "test-webhook-secret-0123456789";
const TRIGGER = { name: "ci", secret: SECRET, projects: [{ repository: "octo-org/shop", project: "shop" }], actors: ["*"], events: ["build.failed"] };

test("a key mapped by hand sends its next delivery to that session as an instruction; bad mappings are refused and nothing changes", async (t) => {
  // The option as a user writes it: the plugin's schema fills the defaults.
  const { server, agent, operator } = await onlineServer(t, { config: { triggers: [TRIGGER] as never } });
  const map = (name: string, body: unknown) => call(server, "PUT", `/operator/triggers/${name}/keys`, body, OPERATOR_TOKEN);

  const refused: [string, unknown, number, string][] = [
    ["nope", { key: "octo-org/shop#7", session_id: "s-1" }, 404, "not_found"],
    ["ci", { key: "octo-org/shop#7" }, 400, "invalid_request"],
    ["ci", { key: "shop#7", session_id: "s-1" }, 400, "invalid_request"],
    ["ci", { key: "octo-org/shop#0", session_id: "s-1" }, 400, "invalid_request"],
    ["ci", { key: "octo-org/other#7", session_id: "s-1" }, 400, "invalid_request"],
    ["ci", { key: "octo-org/shop#7", session_id: "s-gone" }, 409, "session_offline"],
  ];
  for (const [name, body, status, error] of refused) {
    const answer = await map(name, body);
    assert.deepEqual([answer.status, (answer.body as { error: string }).error], [status, error], JSON.stringify(body));
  }
  const mapped = await map("ci", { key: "octo-org/shop#7", session_id: "s-1" });
  assert.deepEqual([mapped.status, mapped.body], [200, { trigger: "ci", key: "octo-org/shop#7", session_id: "s-1", previous: null }]);
  assert.deepEqual((await map("ci", { key: "octo-org/shop#7", session_id: "s-1" })).body, {
    trigger: "ci",
    key: "octo-org/shop#7",
    session_id: "s-1",
    previous: "s-1",
  });
  const audit = (await operator.audit({ kind: "trigger" })).body as { entries: { action: string; actor: string; data: { session_id: string } }[] };
  assert.deepEqual(
    audit.entries.filter((e) => e.action === "trigger.mapped").map((e) => [e.actor, e.data.session_id]),
    [
      ["operator", "s-1"],
      ["operator", "s-1"],
    ],
  );

  const raw = Buffer.from(
    JSON.stringify({ event: "build", action: "failed", repository: "octo-org/shop", number: 7, actor: "ci-runner", title: "Build 7 failed" }),
  );
  const delivery = randomUUID();
  const posted = await fetch(`${server.baseUrl}/triggers/ci`, {
    method: "POST",
    headers: {
      "content-type": "application/json",
      "x-anon-delivery": delivery,
      "x-anon-signature-256": `sha256=${createHmac("sha256", SECRET).update(raw).digest("hex")}`,
    },
    body: raw,
  });
  assert.equal(posted.status, 202);
  const instructions = async () => ((await operator.list("s-1")).body as { commands: { kind: string }[] }).commands.filter((c) => c.kind === "instruction");
  await waitUntil(async () => (await instructions()).length === 1, "the delivery queued for s-1", 10_000);
  const claimed = (await agent.claim("s-1", "r-1", { waitMs: 0 })).body as { command: { instruction: string } };
  assert.match(claimed.command.instruction, /"title": "Build 7 failed"/);
});
