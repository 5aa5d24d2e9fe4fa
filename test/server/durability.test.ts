/**
 * A 202 means the receipt is on disk: `npm start` under `strace` (Debian's `strace` package; .ci/run
 * installs it), and before each acceptance is answered an `fdatasync` (or `fsync`) of the SQLite
 * file has completed. SQLite's own syncs are no-ops in the WebAssembly driver, so without the
 * server's sync no line of the trace shows one at all.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import type { Context } from "koishi";
import { mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { freePort, startKoishi } from "../../harness/koishi.ts";
import { getReceipt, postEvent, validEvent } from "../../harness/event-client.ts";
import { spawnStandalone } from "../../harness/standalone.ts";
import { runStandalone } from "../../server/standalone/start.ts";
import { waitUntil } from "../../harness/wait.ts";

function straceMissing(): string | undefined {
  try {
    execFileSync("strace", ["-V"], { stdio: "ignore" });
    return undefined;
  } catch {
    return "strace is not installed (Debian package strace; .ci/run installs it)";
  }
}

/**
 * For each answer (in order), how many syncs of `file` completed since the previous answer. Reads
 * `strace -f -y` output: a sync in a worker thread may be split into `<unfinished ...>` and
 * `<... fdatasync resumed>` lines, and strace pads a short line's result out to its column 40 (`)      = 0`);
 * an answer is the first 202 written to a socket carrying the event id.
 */
export function syncsBeforeAnswers(trace: string, file: string, eventIds: string[]): number[] {
  const open = new Set<string>();
  const counts: number[] = [];
  let since = 0;
  let next = 0;
  for (const line of trace.split("\n")) {
    const pid = /^(\d+)\s/.exec(line)?.[1] ?? "";
    const sync = /\b(fdatasync|fsync)\((\d+)<([^>]*)>/.exec(line);
    if (sync && sync[3] === file) {
      if (/<unfinished \.\.\.>$/.test(line)) open.add(pid);
      else if (/\)\s+= 0$/.test(line)) since++;
    } else if (/<\.\.\. (fdatasync|fsync) resumed>\)\s+= 0$/.test(line) && open.delete(pid)) {
      since++;
    } else if (next < eventIds.length && /\bwritev?\(\d+<socket:.*HTTP\/1\.1 202/.test(line) && line.includes(eventIds[next]!)) {
      counts.push(since);
      since = 0;
      next++;
    }
  }
  return counts;
}

test("trace reading: syncs are counted per answer, split lines included", () => {
  const db = "/d/koishi.db";
  const trace = [
    `10 fdatasync(25<${db}>) = 0`,
    `10 writev(24<socket:[1]>, [{iov_base="HTTP/1.1 202 Accepted\\r\\n\\r\\n{\\"event_id\\":\\"a\\"}"}], 2) = 9`,
    `11 fdatasync(25<${db}> <unfinished ...>`,
    `12 fdatasync(26</d/other.db>) = 0`,
    `11 <... fdatasync resumed>)            = 0`,
    `10 write(1<socket:[2]>, "[I] anon-persona {\\"event_id\\": \\"b\\"}", 9) = 9`,
    `10 writev(24<socket:[1]>, [{iov_base="HTTP/1.1 202 Accepted\\r\\n\\r\\n{\\"event_id\\":\\"b\\"}"}], 1) = 9`,
    `10 writev(24<socket:[1]>, [{iov_base="HTTP/1.1 202 Accepted\\r\\n\\r\\n{\\"event_id\\":\\"c\\"}"}], 1) = 9`,
  ].join("\n");
  assert.deepEqual(syncsBeforeAnswers(trace, db, ["a", "b", "c"]), [1, 1, 0]);
});

test("every 202 of POST /events is answered after the database file was synced", async (t) => {
  const missing = straceMissing();
  if (missing) return t.skip(missing);
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-durability-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const server = await spawnStandalone(dir, await freePort(), { keepOutput: false });
  t.after(() => server.stop());
  const tracePath = join(dir, "trace");
  // Attached after start-up, so only the acceptances are traced; -f attaches every thread (libuv's pool syncs).
  const strace = spawn("strace", ["-f", "-y", "-s", "512", "-e", "trace=fdatasync,fsync,write,writev", "-o", tracePath, "-p", String(server.child.pid)], {
    stdio: ["ignore", "ignore", "pipe"],
  });
  const straceExited = new Promise<void>((done) => strace.once("exit", () => done()));
  t.after(async () => {
    if (strace.exitCode === null) strace.kill("SIGINT");
    await straceExited;
  });
  let straceErr = "";
  strace.stderr.setEncoding("utf8").on("data", (chunk: string) => (straceErr += chunk));
  await waitUntil(() => straceErr.includes("attached"), `strace attached: ${straceErr}`, 20_000);

  const target = { baseUrl: server.baseUrl, token: (await readFile(join(dir, "token"), "utf8")).trim() };
  const eventIds: string[] = [];
  for (let i = 0; i < 4; i++) {
    const event = validEvent();
    const answer = await postEvent(target, event);
    assert.equal(answer.status, 202, JSON.stringify(answer.body));
    eventIds.push(String(event.event_id));
  }
  strace.kill("SIGINT");
  await straceExited;

  const perAnswer = syncsBeforeAnswers(await readFile(tracePath, "utf8"), join(dir, "koishi.db"), eventIds);
  assert.equal(perAnswer.length, eventIds.length, "every answer found in the trace");
  for (const [i, syncs] of perAnswer.entries()) assert.ok(syncs >= 1, `answer ${i + 1} was sent after ${syncs} syncs of koishi.db`);
});

/** The locking mode of the app's SQLite connection (minato's driver exposes sql.js's `db`). */
function lockingMode(app: Context): unknown {
  const [driver] = app.database.drivers as unknown as { db: { exec(sql: string): { values: unknown[][] }[] } }[];
  return driver!.db.exec("PRAGMA locking_mode")[0]!.values[0]![0];
}

test("npm start holds its own SQLite file (exclusive locking) and reads its receipts back after a restart; a plugin leaves a shared connection as it is", async (t) => {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-locking-"));
  t.after(() => rm(dir, { recursive: true, force: true }));
  const options = { host: "127.0.0.1", port: await freePort(), dataDir: dir, configPath: join(dir, "server.json") };
  let server = await runStandalone(options, process.cwd(), { announce: () => {} });
  t.after(() => server.stop());
  const target = { baseUrl: server.baseUrl, token: (await readFile(join(dir, "token"), "utf8")).trim() };
  const event = validEvent();
  assert.equal((await postEvent(target, event)).status, 202);
  assert.equal(lockingMode(server.app), "exclusive");
  await server.stop();
  server = await runStandalone(options, process.cwd(), { announce: () => {} });
  assert.equal((await getReceipt(target, String(event.event_id)))?.event_id, event.event_id);

  const plugin = await startKoishi({ database: "sqlite" });
  t.after(() => plugin.stop());
  assert.equal((await postEvent(plugin, validEvent())).status, 202);
  assert.equal(lockingMode(plugin.app), "normal");
});
