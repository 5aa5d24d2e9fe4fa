/** The durable outbox for final notices, one file per event, removed only on acceptance. Processes sharing
 * the folder claim an entry by an atomic rename to their owner id; a dead owner's claim can be taken over.
 * All I/O is async and names remembered files, so a put's fsyncs never block a turn. */
import { randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, renameSync, unlinkSync } from "node:fs";
import { readdir, readFile, rename, unlink } from "node:fs/promises";
import { join } from "node:path";
import { z } from "zod";
import { createDurably, type DurableFolder, openDurableFolder, temporaryFileOwner } from "../../common/durable-file.ts";
import { errorText, isMissingFile } from "../../common/errors.ts";
import { Turns } from "../../common/turns.ts";
import { EventBody } from "../../protocol/events.ts";
import { formatIssues, Timestamp } from "../../protocol/wire.ts";

const RECORD_VERSION = 1;
/** Longer than any send can take (attempts × (timeout + the 60 s Retry-After cap)), so only a lost owner exceeds it. */
export const CLAIM_STALE_MS = 60 * 60 * 1000;

const OutboxRecord = z.strictObject({ version: z.literal(RECORD_VERSION), event: EventBody, queued_at: Timestamp });

export type OutboxEntry = { event: EventBody; queuedAt: number };

/** Told of an entry it cannot read (kept as `.bad`); the caller words it in the person's language. */
export type OutboxLog = { movedAside(file: string, why: string): void };

// `<queued ms, 15 digits>-<seq>-<event_id as base64url>` then `.json` (free) or
// `.<pid>-<owner>-<claimed ms>.sending` (claimed). base64url keeps `:` out of file names.
const NAME = /^(\d{15})-(\d{4})-([A-Za-z0-9_-]+)\.(?:json|(\d+)-([0-9a-f]+)-(\d+)\.sending)$/;

type ParsedName = { file: string; base: string; eventId: string; claim?: { pid: number; owner: string; at: number } };

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

/** A rejection handler for a file another process removed or claimed first: that is no error. */
const gone = (error: unknown): undefined => {
  if (!isMissingFile(error)) throw error;
  return undefined;
};

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

export class Outbox {
  readonly dir: string;
  readonly #log: OutboxLog;
  readonly #owner = randomBytes(4).toString("hex");
  #seq = 0;
  /** The last file name this outbox knows for each event: written, claimed or listed by it. */
  readonly #names = new Map<string, ParsedName>();
  /** Operations on one event run one after another (a remove issued before its put finished removes what the put wrote). */
  readonly #turns = new Turns();
  /** Files this outbox is writing now: half-written, so never read, even by this outbox's own list. */
  readonly #writing = new Set<string>();
  readonly #folder: DurableFolder;

  constructor(dir: string, log: OutboxLog) {
    mkdirSync(dir, { recursive: true, mode: 0o700 });
    this.dir = dir;
    this.#log = log;
    liveOwners.add(this.#owner);
    this.#folder = openDurableFolder(dir);
    this.#sweep();
  }

  /** Writes the event durably under this outbox's claim, off the event loop; resolves once on disk. A second put of one event_id is a no-op. */
  async put(event: EventBody, now = Date.now()): Promise<void> {
    const valid = EventBody.parse(event);
    return this.#turns.run(valid.event_id, async () => {
      if (this.#names.has(valid.event_id)) return;
      const record = { version: RECORD_VERSION, event: valid, queued_at: new Date(now).toISOString() };
      // Written straight under this owner's claim: no other process reads it half-written, and the send needs no rename.
      const base = `${String(now).padStart(15, "0")}-${String(this.#seq++ % 10_000).padStart(4, "0")}-${Buffer.from(valid.event_id).toString("base64url")}`;
      // The claim's age is real time (a lost owner is told by it), whatever queue time the caller gave.
      const name = `${base}.${process.pid}-${this.#owner}-${Date.now()}.sending`;
      this.#writing.add(name);
      try {
        await createDurably(join(this.dir, name), JSON.stringify(record));
        // Shared by the puts whose files were written before it starts (a backlog costs one folder sync, not one each).
        await this.#folder.sync();
      } catch (error) {
        await unlink(join(this.dir, name)).catch(() => undefined);
        throw error;
      } finally {
        this.#writing.delete(name);
      }
      this.#names.set(valid.event_id, parseName(name)!);
    });
  }

  /** Entries this process may send now (unclaimed, or claimed by a lost owner), oldest first. */
  async list(): Promise<OutboxEntry[]> {
    const now = Date.now();
    const entries: OutboxEntry[] = [];
    for (const p of await this.#scan()) {
      if (!this.#claimable(p, now)) continue;
      const entry = await this.#read(p);
      if (!entry) continue;
      if (!this.#names.has(p.eventId)) this.#names.set(p.eventId, p);
      entries.push(entry);
    }
    return entries;
  }

  /** Takes the entry for sending once its put finished; false when it is gone or another live owner holds it. */
  claim(eventId: string, now = Date.now()): Promise<boolean> {
    return this.#turns.run(eventId, async () => {
      const known = this.#names.get(eventId);
      if (known && (await this.#claimFile(known, now))) return true;
      // Never known here, or another process moved it since: look for its current name.
      for (const p of (await this.#scan()).filter((p) => p.eventId === eventId)) if (await this.#claimFile(p, now)) return true;
      this.#names.delete(eventId);
      return false;
    });
  }

  /** Gives a claimed entry back after a failed send, for a later pass or process. */
  release(eventId: string): Promise<void> {
    return this.#turns.run(eventId, async () => {
      const known = this.#names.get(eventId);
      if (known) await this.#releaseFile(known);
    });
  }

  /** Deletes the entry (the server accepted it) once its put finished; never another live owner's claim. */
  remove(eventId: string): Promise<void> {
    return this.#turns.run(eventId, async () => {
      const known = this.#names.get(eventId);
      if (known && this.#claimable(known, Date.now())) await this.#unlinkFile(known);
    });
  }

  /** Deletes claimable entries queued more than maxAgeMs before now; resolves to their event ids. */
  async prune(maxAgeMs: number, now: number): Promise<string[]> {
    const pruned: string[] = [];
    for (const p of await this.#scan()) {
      if (!this.#claimable(p, now)) continue;
      const entry = await this.#read(p);
      if (!entry || now - entry.queuedAt <= maxAgeMs) continue;
      const taken = await this.#turns.run(p.eventId, async () => {
        if (!(await this.#claimFile(this.#names.get(p.eventId) ?? p, now))) return false;
        await this.#unlinkFile(this.#names.get(p.eventId)!);
        return true;
      });
      if (taken) pruned.push(p.eventId);
    }
    return pruned;
  }

  /** Waits for operations in progress, releases what this outbox still holds and marks its owner gone. */
  async close(): Promise<void> {
    await this.#turns.settled();
    for (const p of [...this.#names.values()]) await this.#releaseFile(p);
    liveOwners.delete(this.#owner);
    this.#folder.close();
  }

  /** At open: temp files of dead writers go, files that are no entry are moved aside. */
  #sweep(): void {
    for (const file of readdirSync(this.dir)) {
      // A temp file left by a writer of an earlier version that died mid-put: that put never resolved, so nothing was promised.
      const writer = temporaryFileOwner(file);
      if (writer === undefined) {
        if (!file.endsWith(".bad") && !parseName(file)) this.#moveAside(file, "unexpected file name");
      } else if (!pidAlive(writer)) {
        try {
          unlinkSync(join(this.dir, file));
        } catch (error) {
          gone(error);
        }
      }
    }
  }

  async #scan(): Promise<ParsedName[]> {
    const files = (await readdir(this.dir)).filter((file) => !this.#writing.has(file)).sort();
    return files.flatMap((file) => parseName(file) ?? []);
  }

  #mine(p: ParsedName): boolean {
    return p.claim?.owner === this.#owner && p.claim.pid === process.pid;
  }

  #claimable(p: ParsedName, now: number): boolean {
    return p.claim === undefined || this.#mine(p) || ownerLost(p.claim, now);
  }

  // Rare (a corrupt or foreign file), so a plain synchronous rename.
  #moveAside(file: string, why: string): void {
    try {
      renameSync(join(this.dir, file), join(this.dir, `${file}.bad`));
      this.#log.movedAside(join(this.dir, file), why);
    } catch (error) {
      gone(error);
    }
  }

  async #read(p: ParsedName): Promise<OutboxEntry | undefined> {
    const text = await readFile(join(this.dir, p.file), "utf8").catch(gone);
    if (text === undefined) return undefined;
    let parsed: ReturnType<typeof OutboxRecord.safeParse>;
    try {
      parsed = OutboxRecord.safeParse(JSON.parse(text));
    } catch (error) {
      this.#moveAside(p.file, errorText(error));
      return undefined;
    }
    if (!parsed.success || parsed.data.event.event_id !== p.eventId) {
      this.#moveAside(p.file, parsed.success ? "file name and event_id disagree" : formatIssues(parsed.error));
      return undefined;
    }
    return { event: parsed.data.event, queuedAt: Date.parse(parsed.data.queued_at) };
  }

  /** Renames to this owner's claim; false when someone else renamed it first (they won the claim). */
  async #claimFile(p: ParsedName, now: number): Promise<boolean> {
    if (this.#mine(p)) return true;
    if (!this.#claimable(p, now)) return false;
    const claimed = `${p.base}.${process.pid}-${this.#owner}-${now}.sending`;
    if (!(await rename(join(this.dir, p.file), join(this.dir, claimed)).then(() => true, gone))) return false;
    this.#names.set(p.eventId, parseName(claimed)!);
    return true;
  }

  async #releaseFile(p: ParsedName): Promise<void> {
    if (!this.#mine(p)) return;
    const free = `${p.base}.json`;
    if (await rename(join(this.dir, p.file), join(this.dir, free)).then(() => true, gone)) this.#names.set(p.eventId, parseName(free)!);
    // Taken over as stale by another process: it is theirs now.
    else this.#names.delete(p.eventId);
  }

  async #unlinkFile(p: ParsedName): Promise<void> {
    this.#names.delete(p.eventId);
    await unlink(join(this.dir, p.file)).catch(gone);
  }
}
