/**
 * The durable outbox for final notices (completed / failed): written before the first send and
 * removed only when the server accepted the event, so neither a Pi crash nor a server outage loses
 * one. One file per event under `<dataDir>/outbox/`; names start with the queue time, so a name
 * sort is oldest first.
 *
 * Several Pi processes may share the folder. Before sending, a process claims an entry by renaming
 * it to a name carrying its owner id; rename is atomic, so exactly one claimant wins. A claim whose
 * owner is gone (dead pid, or an outbox closed in this process, or older than CLAIM_STALE_MS in case
 * the pid was reused) can be taken over the same way. Nothing is ever deleted except on acceptance,
 * on age, or by moving a corrupt file aside as `.bad`.
 */
import { randomBytes } from "node:crypto";
import { closeSync, fsyncSync, mkdirSync, openSync, readdirSync, readFileSync, renameSync, unlinkSync, writeSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { EventBody, Timestamp } from "./protocol.ts";

const RECORD_VERSION = 1;
/** Longer than any send can take (attempts × (timeout + the 60 s Retry-After cap)), so only a lost owner exceeds it. */
export const CLAIM_STALE_MS = 60 * 60 * 1000;

const OutboxRecord = z.strictObject({ version: z.literal(RECORD_VERSION), event: EventBody, queued_at: Timestamp });

export interface OutboxEntry {
  event: EventBody;
  /** Epoch milliseconds when the event was first written. */
  queuedAt: number;
}

export interface Outbox {
  readonly dir: string;
  /** Writes the event durably (fsync + rename) before returning; a second put of the same event_id is a no-op. */
  put(event: EventBody, now?: number): void;
  /** Entries this process may send now (unclaimed, or claimed by a lost owner), oldest first. */
  list(): OutboxEntry[];
  /** Takes the entry for sending; false when it is gone or another live owner holds it. */
  claim(eventId: string, now?: number): boolean;
  /** Gives a claimed entry back after a failed send, for a later pass or process. */
  release(eventId: string): void;
  /** Deletes the entry (the server accepted it). */
  remove(eventId: string): void;
  /** Deletes claimable entries queued more than maxAgeMs before now; returns their event ids. */
  prune(maxAgeMs: number, now: number): string[];
  /** Releases what this outbox still holds and marks its owner gone. */
  close(): void;
}

export interface OutboxLog {
  warn(message: string): void;
}

// `<queued ms, 15 digits>-<seq>-<event_id as base64url>` then `.json` (free) or
// `.<pid>-<owner>-<claimed ms>.sending` (claimed). base64url keeps `:` out of file names.
const NAME = /^(\d{15})-(\d{4})-([A-Za-z0-9_-]+)\.(?:json|(\d+)-([0-9a-f]+)-(\d+)\.sending)$/;

interface ParsedName {
  file: string;
  base: string;
  eventId: string;
  claim?: { pid: number; owner: string; at: number };
}

function parseName(file: string): ParsedName | undefined {
  const m = NAME.exec(file);
  if (!m) return undefined;
  const [, time, seq, id, pid, owner, at] = m;
  const base = `${time}-${seq}-${id}`;
  const eventId = Buffer.from(id!, "base64url").toString("utf8");
  return pid === undefined ? { file, base, eventId } : { file, base, eventId, claim: { pid: Number(pid), owner: owner!, at: Number(at) } };
}

// Owners alive in this process, shared across module copies (Pi's /reload loads a fresh copy).
const LIVE_OWNERS_KEY = Symbol.for("anon-notify.outbox.live-owners");
const liveOwners: Set<string> = ((globalThis as Record<symbol, unknown>)[LIVE_OWNERS_KEY] ??= new Set<string>()) as Set<string>;

function pidAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but belongs to someone else.
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

function ownerLost(claim: NonNullable<ParsedName["claim"]>, now: number): boolean {
  if (now - claim.at > CLAIM_STALE_MS) return true;
  if (claim.pid === process.pid) return !liveOwners.has(claim.owner);
  return !pidAlive(claim.pid);
}

const TMP_PREFIX = ".tmp-";

function writeDurably(dir: string, name: string, text: string): void {
  const tmp = join(dir, `${TMP_PREFIX}${process.pid}-${randomBytes(4).toString("hex")}`);
  const fd = openSync(tmp, "wx", 0o600);
  try {
    writeSync(fd, text);
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
  renameSync(tmp, join(dir, name));
  syncDir(dir);
}

function syncDir(dir: string): void {
  // Makes the rename itself durable. Windows cannot open a directory for fsync; there the rename
  // is as durable as the platform makes it.
  if (process.platform === "win32") return;
  const fd = openSync(dir, "r");
  try {
    fsyncSync(fd);
  } finally {
    closeSync(fd);
  }
}

export function openOutbox(dir: string, log: OutboxLog): Outbox {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const owner = randomBytes(4).toString("hex");
  liveOwners.add(owner);
  let seq = 0;

  const files = () => readdirSync(dir).sort();
  const entries = () => files().map(parseName).filter((p): p is ParsedName => p !== undefined);
  const find = (eventId: string) => entries().filter((p) => p.eventId === eventId);
  const mine = (p: ParsedName) => p.claim?.owner === owner && p.claim.pid === process.pid;
  const claimable = (p: ParsedName, now: number) => p.claim === undefined || mine(p) || ownerLost(p.claim, now);

  const moveAside = (file: string, why: string) => {
    try {
      renameSync(join(dir, file), join(dir, `${file}.bad`));
      log.warn(`outbox 文件 ${join(dir, file)} 无法读取，已改名为 .bad 保留 (corrupt outbox entry moved aside): ${why}`);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  };

  const read = (p: ParsedName): OutboxEntry | undefined => {
    let text: string;
    try {
      text = readFileSync(join(dir, p.file), "utf8");
    } catch (error) {
      // Another process removed or claimed it between the listing and the read.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return undefined;
      throw error;
    }
    let parsed: ReturnType<typeof OutboxRecord.safeParse>;
    try {
      parsed = OutboxRecord.safeParse(JSON.parse(text));
    } catch (error) {
      moveAside(p.file, (error as Error).message);
      return undefined;
    }
    if (!parsed.success) {
      moveAside(p.file, parsed.error.issues.map((i) => `${i.path.join(".")}: ${i.message}`).join("; "));
      return undefined;
    }
    if (parsed.data.event.event_id !== p.eventId) {
      moveAside(p.file, "file name and event_id disagree");
      return undefined;
    }
    return { event: parsed.data.event, queuedAt: Date.parse(parsed.data.queued_at) };
  };

  const claimParsed = (p: ParsedName, now: number): boolean => {
    if (mine(p)) return true;
    try {
      renameSync(join(dir, p.file), join(dir, `${p.base}.${process.pid}-${owner}-${now}.sending`));
      return true;
    } catch (error) {
      // Someone else renamed it first: they won the claim.
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return false;
      throw error;
    }
  };

  const releaseParsed = (p: ParsedName) => {
    if (!mine(p)) return;
    renameSync(join(dir, p.file), join(dir, `${p.base}.json`));
  };

  const unlinkIfPresent = (file: string) => {
    try {
      unlinkSync(join(dir, file));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "ENOENT") throw error;
    }
  };

  for (const file of files()) {
    // A temp file left by a writer that died mid-put: that put never returned, so nothing was promised.
    if (file.startsWith(TMP_PREFIX)) {
      if (!pidAlive(Number(file.slice(TMP_PREFIX.length).split("-")[0]))) unlinkIfPresent(file);
    } else if (!file.endsWith(".bad") && !parseName(file)) moveAside(file, "unexpected file name");
  }

  return {
    dir,
    put(event, now = Date.now()) {
      const valid = EventBody.parse(event);
      if (find(valid.event_id).length > 0) return;
      const record = { version: RECORD_VERSION, event: valid, queued_at: new Date(now).toISOString() };
      const name = `${String(now).padStart(15, "0")}-${String(seq++ % 10_000).padStart(4, "0")}-${Buffer.from(valid.event_id).toString("base64url")}.json`;
      writeDurably(dir, name, JSON.stringify(record));
    },
    list() {
      const now = Date.now();
      return entries()
        .filter((p) => claimable(p, now))
        .flatMap((p) => read(p) ?? []);
    },
    claim(eventId, now = Date.now()) {
      return find(eventId).some((p) => claimable(p, now) && claimParsed(p, now));
    },
    release(eventId) {
      for (const p of find(eventId)) releaseParsed(p);
    },
    remove(eventId) {
      for (const p of find(eventId)) if (claimable(p, Date.now())) unlinkIfPresent(p.file);
    },
    prune(maxAgeMs, now) {
      const pruned: string[] = [];
      for (const p of entries()) {
        if (!claimable(p, now)) continue;
        const entry = read(p);
        if (entry && now - entry.queuedAt > maxAgeMs && claimParsed(p, now)) {
          for (const claimed of find(p.eventId)) if (mine(claimed)) unlinkIfPresent(claimed.file);
          pruned.push(p.eventId);
        }
      }
      return pruned;
    },
    close() {
      for (const p of entries()) releaseParsed(p);
      liveOwners.delete(owner);
    },
  };
}
