/**
 * The two habits that keep a failing test from hanging the suite: waits are bounded in time, and a
 * tear-down runs every step even when one throws.
 */
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import test from "node:test";
import { existsSync } from "node:fs";
import { createServer, type Server } from "node:net";
import { closeAll } from "../../harness/cleanup.ts";
import { startKoishi } from "../../harness/koishi.ts";
import { firstLine, waitUntil } from "../../harness/wait.ts";

test("a wait whose every check is slow still gives up at its time bound, saying what was last seen", async () => {
  let seen = 0;
  const started = Date.now();
  const slowCheck = async () => {
    await new Promise((resolve) => setTimeout(resolve, 50));
    seen++;
    return false;
  };
  await assert.rejects(
    waitUntil(slowCheck, () => `a check that never holds (seen ${seen})`, 200),
    (error: Error) => /^never happened within 200 ms: a check that never holds \(seen \d+\)$/.test(error.message) && !error.message.includes("seen 0"),
  );
  // Bounded by time, not by a count of tries: a handful of 50 ms checks, not hundreds.
  assert.ok(seen < 20, `gave up after ${seen} checks`);
  assert.ok(Date.now() - started >= 200);
});

test("a wait returns the first value that is neither undefined nor false, 0 and null included", async () => {
  for (const value of [0, null, "", true, { ok: 1 }]) {
    let calls = 0;
    assert.deepEqual(await waitUntil(() => (++calls < 3 ? false : value), "a value"), value);
    assert.equal(calls, 3);
  }
});

test("a child's first line is read within a bound, and a child that exits silently fails at once", async () => {
  const talker = spawn(process.execPath, ["-e", "process.stdout.write('hello\\nmore')"], { stdio: ["ignore", "pipe", "inherit"] });
  assert.equal(await firstLine(talker, "the greeting"), "hello");
  const silent = spawn(process.execPath, ["-e", ""], { stdio: ["ignore", "pipe", "inherit"] });
  await assert.rejects(firstLine(silent, "a line that never comes", 60_000), /the child exited before a line that never comes/);
  const mute = spawn(process.execPath, ["-e", "setTimeout(() => {}, 60_000)"], { stdio: ["ignore", "pipe", "inherit"] });
  try {
    await assert.rejects(firstLine(mute, "a line from a mute child", 300), /never happened within 300 ms: a line from a mute child/);
  } finally {
    mute.kill("SIGKILL");
  }
});

test("a tear-down runs every step when some throw, and reports the failures", async () => {
  const table: { steps: ("ok" | "throws")[]; error: { message: string } | undefined }[] = [
    { steps: ["ok", "ok"], error: undefined },
    { steps: ["throws", "ok", "ok"], error: { message: "step 0" } },
    { steps: ["ok", "throws", "throws"], error: { message: "several clean-up steps failed" } },
  ];
  for (const { steps, error } of table) {
    const ran: number[] = [];
    const done = closeAll(
      ...steps.map((kind, i) => async () => {
        ran.push(i);
        if (kind === "throws") throw new Error(`step ${i}`);
      }),
    );
    if (error) await assert.rejects(done, error);
    else await done;
    assert.deepEqual(
      ran,
      steps.map((_, i) => i),
      `every step ran for ${steps.join(", ")}`,
    );
  }
});

test("a Koishi restart that never gets ready fails within its bound instead of hanging, and stop() still cleans up", async (t) => {
  let starts = 0;
  let port = 0;
  let blocker: Server | undefined;
  t.after(() => new Promise<void>((resolve) => (blocker ? blocker.close(() => resolve()) : resolve())));
  const koishi = await startKoishi({
    readyMs: 1_500,
    // On the restart, something else takes the port first, so the new app can never listen.
    plugins: async () => {
      if (starts++ === 0) return;
      blocker = createServer();
      await new Promise<void>((resolve) => blocker!.listen(port, "127.0.0.1", resolve));
    },
  });
  port = Number(new URL(koishi.baseUrl).port);
  await assert.rejects(koishi.restart(), /never happened within 1500 ms: Koishi listening on port/);
  await koishi.stop();
  assert.equal(existsSync(koishi.dataDir), false, "the temp folder is gone");
});
