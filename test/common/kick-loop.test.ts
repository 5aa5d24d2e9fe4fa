import assert from "node:assert/strict";
import test from "node:test";
import fc from "fast-check";
import { kickLoop } from "../../common/kick-loop.ts";

test("kickLoop: passes never overlap, and every kick is followed by a pass that starts after it (generated)", async () => {
  // Each step kicks some number of times while the pass in progress waits.
  await fc.assert(
    fc.asyncProperty(fc.array(fc.nat(3), { minLength: 1, maxLength: 6 }), async (kicksPerPass) => {
      let running = 0;
      let passes = 0;
      let lastKickAt = -1;
      let lastPassStartAt = -1;
      let clock = 0;
      const release: (() => void)[] = [];
      const kick = kickLoop(
        async () => {
          assert.equal(running, 0, "a second pass at once");
          running++;
          lastPassStartAt = clock++;
          passes++;
          await new Promise<void>((resolve) => release.push(resolve));
          running--;
        },
        (error) => assert.fail(String(error)),
      );
      kick();
      for (const kicks of kicksPerPass) {
        for (let i = 0; i < kicks; i++) {
          lastKickAt = clock++;
          kick();
        }
        release.shift()?.();
        await new Promise((resolve) => setImmediate(resolve));
      }
      while (release.length > 0) {
        release.shift()!();
        await new Promise((resolve) => setImmediate(resolve));
      }
      assert.ok(lastPassStartAt > lastKickAt, "the last kick was answered by a later pass");
      assert.ok(passes <= kicksPerPass.length + 1, "kicks during one pass make at most one more");
    }),
  );
});

test("kickLoop: a pass that throws is handed to failed, and a later kick runs again", async () => {
  const failures: unknown[] = [];
  let calls = 0;
  const kick = kickLoop(
    async () => {
      calls++;
      if (calls === 1) throw new Error("disk full");
    },
    (error) => failures.push(error),
  );
  kick();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(failures.length, 1);
  kick();
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(calls, 2);
  assert.equal(failures.length, 1);
});
