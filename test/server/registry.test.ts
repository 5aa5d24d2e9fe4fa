import { test } from "node:test";
import assert from "node:assert/strict";
import { SessionProjection, type Heartbeat } from "../../protocol/sessions.ts";
import { SessionRegistry } from "../../server/sessions/registry.ts";
import { heartbeatOf } from "../../harness/agent-api.ts";

const heartbeat = (overrides: Partial<Heartbeat> = {}) => heartbeatOf({ last_activity_at: "2026-11-30T03:00:00.000Z", ...overrides });

function clocked(ttlMs = 30_000) {
  const clock = { ms: Date.parse("2026-11-30T03:00:00.000Z") };
  return { clock, registry: new SessionRegistry(ttlMs, () => clock.ms) };
}

test("an entry is live until the TTL has passed since its last heartbeat", () => {
  const { clock, registry } = clocked(30_000);
  registry.record(heartbeat());
  clock.ms += 29_999;
  assert.ok(registry.find("s-1"));
  assert.ok(registry.isLiveRuntime("s-1", "r-1"));
  clock.ms += 1;
  assert.equal(registry.find("s-1"), undefined);
  assert.equal(registry.isLiveRuntime("s-1", "r-1"), false);
  assert.deepEqual(registry.list(), []);
});

test("a heartbeat renews the TTL", () => {
  const { clock, registry } = clocked(30_000);
  registry.record(heartbeat());
  clock.ms += 20_000;
  registry.record(heartbeat({ state: "running" }));
  clock.ms += 20_000;
  assert.equal(registry.find("s-1")?.heartbeat.state, "running");
});

test("offline from another runtime never removes the registered one", () => {
  const { clock, registry } = clocked();
  registry.record(heartbeat({ runtime_id: "r-old" }));
  clock.ms += registry.ttlMs;
  registry.record(heartbeat({ runtime_id: "r-new" }));
  assert.equal(registry.remove("s-1", "r-old"), false);
  assert.ok(registry.isLiveRuntime("s-1", "r-new"));
  assert.equal(registry.isLiveRuntime("s-1", "r-old"), false);
  assert.equal(registry.remove("s-1", "r-new"), true);
  assert.equal(registry.find("s-1"), undefined);
  assert.equal(registry.remove("s-1", "r-new"), false);
  assert.equal(registry.remove("unknown", "r-new"), false);
});

test("the projection holds exactly the safe keys, newest first", () => {
  const { clock, registry } = clocked();
  registry.record(heartbeat({ session_id: "s-a", activity: "bash" }));
  clock.ms += 1000;
  registry.record(heartbeat({ session_id: "s-b", supports_images: true, command_protocol: 1 }));
  const list = registry.list();
  assert.deepEqual(
    list.map((s) => s.session_id),
    ["s-b", "s-a"],
  );
  for (const item of list) {
    assert.deepEqual(Object.keys(item).sort(), [
      "activity",
      "last_activity_at",
      "last_seen_at",
      "mixed_scripts",
      "model",
      "project",
      "session_id",
      "state",
      "supports_images",
    ]);
    assert.ok(SessionProjection.safeParse(item).success);
    assert.ok(!JSON.stringify(item).includes("r-1"));
  }
  // Protocol 1 clients cannot receive image commands, whatever they claim.
  assert.equal(list[0]?.supports_images, false);
  assert.equal(list[1]?.supports_images, true);
  assert.equal(list[0]?.last_seen_at, new Date(clock.ms).toISOString());
});

test("sweep removes and returns only expired entries", () => {
  const { clock, registry } = clocked(30_000);
  registry.record(heartbeat({ session_id: "s-old" }));
  clock.ms += 20_000;
  registry.record(heartbeat({ session_id: "s-fresh" }));
  clock.ms += 15_000;
  assert.deepEqual(
    registry.sweep().map((e) => e.heartbeat.session_id),
    ["s-old"],
  );
  assert.equal(registry.size, 1);
  assert.deepEqual(registry.sweep(), []);
});
