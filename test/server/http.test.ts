import { after, before, describe, test } from "node:test";
import assert from "node:assert/strict";
import { HealthAnswer } from "../../protocol.ts";
import { startKoishi, type KoishiHarness } from "../helpers/koishi.ts";

describe("shared HTTP edge", () => {
  let koishi: KoishiHarness;
  before(async () => {
    koishi = await startKoishi({ config: { sessionHeartbeatTimeoutMs: 45_000 } });
  });
  after(() => koishi.stop());

  test("health answers the protocol shape with the configured heartbeat timeout", async () => {
    const response = await fetch(`${koishi.baseUrl}/health`, { headers: { authorization: `Bearer ${koishi.token}` } });
    assert.equal(response.status, 200);
    const health = HealthAnswer.parse(await response.json());
    assert.equal(health.session_heartbeat_timeout_ms, 45_000);
  });

  for (const [label, header] of [["missing", undefined], ["wrong", "Bearer nope"], ["not bearer", "Basic abc"]] as const) {
    test(`a ${label} token gets 401 unauthorized`, async () => {
      const response = await fetch(`${koishi.baseUrl}/health`, { headers: header ? { authorization: header } : {} });
      assert.equal(response.status, 401);
      assert.deepEqual(await response.json(), { error: "unauthorized" });
    });
  }
});
