import { test, after } from "node:test";
import assert from "node:assert/strict";
import { spawn, spawnSync } from "node:child_process";
import { once } from "node:events";
import { mkdtempSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { CLAIM_STALE_MS, Outbox } from "../../extension/notices/outbox.ts";
import type { EventBody } from "../../protocol/events.ts";
import { firstLine } from "../../harness/wait.ts";

const roots: string[] = [];
const opened: Outbox[] = [];
after(async () => {
  for (const outbox of opened) await outbox.close();
  for (const root of roots) rmSync(root, { recursive: true, force: true });
});

function tempDir(): string {
  const root = mkdtempSync(join(tmpdir(), "anon-notify-outbox-"));
  roots.push(root);
  return join(root, "outbox");
}

function open(dir: string, warnings: string[] = []): Outbox {
  const outbox = new Outbox(dir, { movedAside: (file, why) => warnings.push(`${file}: ${why}`) });
  opened.push(outbox);
  return outbox;
}

function finalEvent(id: string, summary = "done"): EventBody {
  return {
    event_id: id,
    session_id: "019a-session",
    source: "Pi Agent · demo",
    task: "fix the tests",
    status: "completed",
    summary,
    details: null,
    url: null,
    context_usage: null,
    created_at: "2026-11-30T03:00:00.000Z",
    delivery: "anon",
  };
}

/** The pid of a process that has exited, so no live owner can hold it. */
function deadPid(): number {
  const child = spawnSync(process.execPath, ["-e", ""]);
  assert.ok(child.pid);
  return child.pid;
}

const ids = async (outbox: Outbox) => (await outbox.list()).map((entry) => entry.event.event_id);

test("put writes a versioned record with mode 0600 that list returns", async () => {
  const dir = tempDir();
  const outbox = open(dir);
  const event = finalEvent("pi:s1:run:1");
  await outbox.put(event, Date.UTC(2026, 10, 30, 3, 0, 0));
  const files = readdirSync(dir);
  assert.equal(files.length, 1);
  assert.equal(statSync(join(dir, files[0]!)).mode & 0o777, 0o600);
  assert.deepEqual(JSON.parse(readFileSync(join(dir, files[0]!), "utf8")), {
    version: 1,
    event,
    queued_at: "2026-11-30T03:00:00.000Z",
  });
  assert.deepEqual(await outbox.list(), [{ event, queuedAt: Date.UTC(2026, 10, 30, 3, 0, 0) }]);
  assert.ok(!files[0]!.includes(":"), "event ids with ':' still make portable file names");
});

test("list is oldest first whatever the order of writing", async () => {
  const outbox = open(tempDir());
  const times: [string, number][] = [
    ["pi:b", 2_000],
    ["pi:c", 3_000],
    ["pi:a", 1_000],
    ["pi:d", 10_000_000_000_000],
  ];
  for (const [id, at] of times) await outbox.put(finalEvent(id), at);
  assert.deepEqual(await ids(outbox), ["pi:a", "pi:b", "pi:c", "pi:d"]);
});

test("a second put of the same event_id keeps one entry; remove deletes it", async () => {
  const dir = tempDir();
  const outbox = open(dir);
  await outbox.put(finalEvent("pi:dup"), 1_000);
  await outbox.put(finalEvent("pi:dup"), 2_000);
  assert.equal(readdirSync(dir).length, 1);
  await outbox.remove("pi:dup");
  assert.deepEqual(readdirSync(dir), []);
  await outbox.remove("pi:dup");
});

test("claim and remove issued before their put finished wait for it: nothing stale is left, nothing else is deleted", async () => {
  const dir = tempDir();
  const outbox = open(dir);
  const other = open(dir);
  await other.put(finalEvent("pi:neighbour"), 500);
  await other.release("pi:neighbour"); // left for any owner, as after a failed send
  const put = outbox.put(finalEvent("pi:racing"), 1_000);
  const claimed = outbox.claim("pi:racing");
  const removed = outbox.remove("pi:racing");
  await Promise.all([put, removed]);
  assert.equal(await claimed, true, "the claim found the entry its put wrote");
  assert.deepEqual(await ids(outbox), ["pi:neighbour"], "the raced entry is gone and the neighbour kept");
  assert.equal(readdirSync(dir).filter((f) => f.startsWith(".tmp-")).length, 0, "no temp file is left behind");

  const again = outbox.put(finalEvent("pi:released"), 2_000);
  const held = outbox.claim("pi:released");
  const released = outbox.release("pi:released");
  await Promise.all([again, held, released]);
  assert.equal(await other.claim("pi:released"), true, "a release after a pending put gives the written entry back");
});

test("put refuses an event that is not a valid wire body", async () => {
  const outbox = open(tempDir());
  await assert.rejects(outbox.put({ ...finalEvent("pi:x"), summary: "x".repeat(1201) }));
  await assert.rejects(outbox.put({ ...finalEvent("bad id with spaces") }));
  assert.deepEqual(await outbox.list(), []);
});

test("corrupt entries are moved aside as .bad with a warning, never dropped, and the rest still list", async () => {
  const dir = tempDir();
  const warnings: string[] = [];
  const outbox = open(dir, warnings);
  await outbox.put(finalEvent("pi:good"), 5_000);
  await outbox.put(finalEvent("pi:truncated"), 1_000);
  await outbox.put(finalEvent("pi:wrong-version"), 2_000);
  await outbox.put(finalEvent("pi:renamed"), 3_000);
  const fileOf = (id: string) => readdirSync(dir).find((f) => f.includes(Buffer.from(id).toString("base64url")))!;

  const truncated = fileOf("pi:truncated");
  writeFileSync(join(dir, truncated), '{"version":1,"ev');
  const wrongVersion = fileOf("pi:wrong-version");
  const record = JSON.parse(readFileSync(join(dir, wrongVersion), "utf8"));
  writeFileSync(join(dir, wrongVersion), JSON.stringify({ ...record, version: 2 }));
  const renamed = fileOf("pi:renamed");
  const other = JSON.parse(readFileSync(join(dir, renamed), "utf8"));
  writeFileSync(join(dir, renamed), JSON.stringify({ ...other, event: finalEvent("pi:someone-else") }));

  assert.deepEqual(await ids(outbox), ["pi:good"]);
  for (const file of [truncated, wrongVersion, renamed]) {
    assert.ok(readdirSync(dir).includes(`${file}.bad`), `${file} kept as .bad`);
    assert.ok(
      warnings.some((w) => w.includes(file)),
      `${file} warned`,
    );
  }
  assert.equal(readFileSync(join(dir, `${truncated}.bad`), "utf8"), '{"version":1,"ev', "the bytes are kept for a person to inspect");
  assert.deepEqual(await ids(outbox), ["pi:good"], "a .bad file is not read again");
});

test("opening moves unexpected files aside and removes temp files of dead writers only", async () => {
  const dir = tempDir();
  const writer = open(dir);
  await writer.put(finalEvent("pi:keep"), 1_000);
  await writer.close();
  writeFileSync(join(dir, "notes.txt"), "hand-written");
  writeFileSync(join(dir, `.tmp-${deadPid()}-abcd`), "half a record");
  writeFileSync(join(dir, `.tmp-${process.pid}-beef`), "a write in progress");
  const warnings: string[] = [];
  const outbox = open(dir, warnings);
  const files = readdirSync(dir);
  assert.ok(files.includes("notes.txt.bad"));
  assert.ok(warnings.some((w) => w.includes("notes.txt")));
  assert.ok(files.includes(`.tmp-${process.pid}-beef`), "a live writer's temp file is left alone");
  assert.equal(files.filter((f) => f.startsWith(".tmp-")).length, 1);
  assert.deepEqual(await ids(outbox), ["pi:keep"]);
});

test("a claim is exclusive between two outboxes until released; a new entry is its writer's from the start", async () => {
  const dir = tempDir();
  const first = open(dir);
  const second = open(dir);
  await first.put(finalEvent("pi:one"), 1_000);
  await first.put(finalEvent("pi:two"), 2_000);
  assert.deepEqual(await ids(second), [], "entries being sent by their writer are not offered");
  await first.release("pi:two");

  assert.equal(await first.claim("pi:one"), true);
  assert.equal(await first.claim("pi:one"), true, "claiming again what it already holds is fine");
  assert.equal(await second.claim("pi:one"), false);
  assert.deepEqual(await ids(second), ["pi:two"], "another owner's live claim is not offered");
  assert.deepEqual(await ids(first), ["pi:one", "pi:two"]);
  await second.remove("pi:one");
  assert.deepEqual(await ids(first), ["pi:one", "pi:two"], "remove does not touch another live owner's claim");

  await first.release("pi:one");
  assert.equal(await second.claim("pi:one"), true);
  await second.remove("pi:one");
  assert.deepEqual(await ids(first), ["pi:two"]);
  assert.equal(await first.claim("pi:gone"), false);
});

test("close gives back what the outbox still holds", async () => {
  const dir = tempDir();
  const first = open(dir);
  const second = open(dir);
  await first.put(finalEvent("pi:held"), 1_000);
  assert.ok(await first.claim("pi:held"));
  await first.close();
  assert.equal(await second.claim("pi:held"), true);
});

test("claims of a dead process or older than the stale limit can be taken over", async () => {
  const dir = tempDir();
  const outbox = open(dir);
  await outbox.put(finalEvent("pi:dead-owner"), 1_000);
  await outbox.put(finalEvent("pi:old-claim"), 2_000);
  const now = Date.now();
  const claimAs = (id: string, pid: number, at: number) => {
    const file = readdirSync(dir).find((f) => f.includes(Buffer.from(id).toString("base64url")))!;
    renameSync(join(dir, file), join(dir, file.replace(/\.json$/, `.${pid}-0badc0de-${at}.sending`)));
  };
  claimAs("pi:dead-owner", deadPid(), now);
  // The parent process is alive, but a claim this old means its pid was reused or it hung.
  claimAs("pi:old-claim", process.ppid, now - CLAIM_STALE_MS - 1);
  assert.deepEqual(await ids(outbox), ["pi:dead-owner", "pi:old-claim"]);
  assert.ok(await outbox.claim("pi:dead-owner", now));
  assert.ok(await outbox.claim("pi:old-claim", now));
});

test("an entry claimed by another live process is left alone, and taken over once that process is killed", async (t) => {
  const dir = tempDir();
  const outbox = open(dir);
  await outbox.put(finalEvent("pi:cross"), 1_000);
  await outbox.release("pi:cross"); // as after a failed send
  const outboxModule = fileURLToPath(new URL("../../extension/notices/outbox.ts", import.meta.url));
  const child = spawn(
    process.execPath,
    [
      "--input-type=module",
      "-e",
      `import { Outbox } from ${JSON.stringify(outboxModule)};
       const outbox = new Outbox(${JSON.stringify(dir)}, { movedAside: console.warn });
       process.stdout.write(String(await outbox.claim("pi:cross")) + "\\n");
       setInterval(() => {}, 1000);`,
    ],
    { stdio: ["ignore", "pipe", "inherit"] },
  );
  t.after(() => child.kill("SIGKILL"));
  assert.equal(await firstLine(child, "the child claimed the entry"), "true");
  assert.equal(await outbox.claim("pi:cross"), false);
  assert.deepEqual(await ids(outbox), []);
  assert.deepEqual(await outbox.prune(0, Date.now() + 1), [], "prune leaves a live owner's claim alone");

  child.kill("SIGKILL");
  await once(child, "exit");
  assert.deepEqual(await ids(outbox), ["pi:cross"]);
  assert.equal(await outbox.claim("pi:cross"), true);
});

test("prune deletes entries older than the limit and reports their ids", async () => {
  const dir = tempDir();
  const outbox = open(dir);
  await outbox.put(finalEvent("pi:old"), 1_000);
  await outbox.put(finalEvent("pi:edge"), 5_000);
  await outbox.put(finalEvent("pi:new"), 9_000);
  assert.deepEqual(await outbox.prune(5_000, 10_000), ["pi:old"]);
  assert.deepEqual(await ids(outbox), ["pi:edge", "pi:new"]);
  assert.deepEqual(await outbox.prune(5_000, 10_000), []);
});
