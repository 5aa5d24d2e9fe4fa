/** Durable writes: a file is complete on disk before anyone can see it, and its folder entry survives a
 * crash too (rename and append are durable only once the folder is fsynced). */
import { randomBytes } from "node:crypto";
import { closeSync, constants, fsync, openSync } from "node:fs";
import { mkdir, open, rename, unlink, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";

const TMP_PREFIX = ".tmp-";

/** The pid of the process that wrote a temporary file `replaceDurably` left behind, or undefined for any other name. */
export function temporaryFileOwner(name: string): number | undefined {
  if (!name.startsWith(TMP_PREFIX)) return undefined;
  return Number(name.slice(TMP_PREFIX.length).split("-")[0]);
}

/** Writes `text` to `path` atomically: a private temporary file in the same folder, fsynced, renamed over the target, then the folder fsynced. */
export async function replaceDurably(path: string, text: string): Promise<void> {
  const dir = dirname(path);
  const tmp = join(dir, `${TMP_PREFIX}${process.pid}-${randomBytes(4).toString("hex")}`);
  try {
    // `flush` fsyncs the file before it is closed.
    await writeFile(tmp, text, { flag: "wx", mode: 0o600, flush: true });
    await rename(tmp, path);
  } catch (error) {
    await unlink(tmp).catch(() => undefined);
    throw error;
  }
  await syncFolder(dir);
}

/** Appends `text` and fsyncs it; creates the file 0600 (and its folder 0700) when missing. */
export async function appendDurably(path: string, text: string): Promise<void> {
  await mkdir(dirname(path), { recursive: true, mode: 0o700 });
  const handle = await open(path, "a", 0o600);
  try {
    await handle.writeFile(text, "utf8");
    await handle.sync();
  } finally {
    await handle.close();
  }
}

export async function syncFolder(dir: string): Promise<void> {
  // Windows cannot open a directory for fsync; there a rename is as durable as the platform makes it.
  if (process.platform === "win32") return;
  const handle = await open(dir, "r");
  try {
    await handle.sync();
  } finally {
    await handle.close();
  }
}

// Where the platform has it, O_DSYNC makes each write durable before it returns: no separate fsync.
const DSYNC = constants.O_DSYNC ?? 0;

/** Creates `path` (0600; it must not exist yet) holding `text`, on disk before it resolves. */
export async function createDurably(path: string, text: string): Promise<void> {
  const handle = await open(path, constants.O_CREAT | constants.O_EXCL | constants.O_WRONLY | DSYNC, 0o600);
  try {
    await handle.writeFile(text, "utf8");
    if (!DSYNC) await handle.sync();
  } finally {
    await handle.close();
  }
}

/** A folder held open, so making its new entries durable costs one fsync, shared by the callers that overlap. */
export type DurableFolder = { sync(): Promise<void>; close(): void };

export function openDurableFolder(dir: string): DurableFolder {
  // Windows cannot open a directory for fsync; there a new entry is as durable as the platform makes it.
  if (process.platform === "win32") return { sync: async () => {}, close: () => {} };
  let fd: number | undefined = openSync(dir, "r");
  const fsyncNow = (): Promise<void> => {
    const held = fd;
    // Closed (a late write after shutdown): open it just for this fsync.
    if (held === undefined) return syncFolder(dir);
    return new Promise<void>((resolve, reject) => fsync(held, (error) => (error ? reject(error) : resolve())));
  };
  let running: Promise<void> = Promise.resolve();
  let next: Promise<void> | undefined;
  return {
    // Callers that arrive while one fsync runs share the next one, which starts after it and so
    // covers every entry they made: a burst of new entries costs two fsyncs, not one each.
    sync: () =>
      (next ??= running
        .catch(() => undefined)
        .then(() => {
          next = undefined;
          running = fsyncNow();
          return running;
        })),
    close() {
      if (fd !== undefined) closeSync(fd);
      fd = undefined;
    },
  };
}
