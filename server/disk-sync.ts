/** Forces database writes onto disk before an acceptance is answered (sql.js's fsync is a no-op); one
 * `fdatasync` covers every write before it, so concurrent callers share one (group commit). */
import { open, type FileHandle } from "node:fs/promises";
import { setImmediate } from "node:timers/promises";

/** A driver that writes a file, as minato's SQLite driver exposes it: `path`, and `db` (sql.js). */
interface FileDriver {
  path: string;
  db?: { exec?: unknown };
}

function fileDrivers(drivers: readonly unknown[]): FileDriver[] {
  return drivers.filter((driver): driver is FileDriver => {
    const path = (driver as { path?: unknown } | null)?.path;
    return typeof path === "string" && path !== "" && path !== ":memory:";
  });
}

/** For a process that owns its database (`npm start`, the benches): exclusive locking on each sql.js connection. sql.js takes no file locks anyway, and
 * normal locking costs a tenth of the CPU per acceptance (docs/reliability.md); the journal still protects every transaction. */
export function holdDatabaseFiles(drivers: readonly unknown[]): void {
  for (const driver of fileDrivers(drivers)) {
    if (typeof driver.db?.exec === "function") (driver.db as { exec(sql: string): unknown }).exec("PRAGMA locking_mode = EXCLUSIVE");
  }
}

export class DiskSync {
  readonly #drivers: readonly unknown[];
  readonly #handles = new Map<string, FileHandle>();
  /** The sync that has not started yet: every caller until it starts is covered by it. */
  #next: Promise<void> | undefined;
  #running: Promise<void> = Promise.resolve();
  #closed = false;

  /** `drivers`: the database's own list, which minato keeps current: read at each sync, it covers a driver that starts later. */
  constructor(drivers: readonly unknown[]) {
    this.#drivers = drivers;
  }

  /** Resolves once everything written before the call is on disk; rejects if a sync failed. */
  flush(): Promise<void> {
    if (this.#closed) return Promise.reject(new Error("disk sync closed"));
    this.#next ??= this.#after(this.#running);
    return this.#next;
  }

  async #after(previous: Promise<void>): Promise<void> {
    // Let the rest of this tick's writes join, and never overlap a sync still running.
    await Promise.all([previous.catch(() => undefined), setImmediate()]);
    this.#next = undefined;
    const run = this.#syncAll();
    this.#running = run;
    await run;
  }

  async #syncAll(): Promise<void> {
    await Promise.all(fileDrivers(this.#drivers).map(async ({ path }) => (await this.#handle(path)).datasync()));
  }

  async #handle(file: string): Promise<FileHandle> {
    let handle = this.#handles.get(file);
    if (!handle) {
      // Read-only is enough: fdatasync flushes the file's dirty pages whichever descriptor asks.
      handle = await open(file, "r");
      if (this.#closed) {
        await handle.close();
        throw new Error("disk sync closed");
      }
      this.#handles.set(file, handle);
    }
    return handle;
  }

  async close(): Promise<void> {
    this.#closed = true;
    await this.#running.catch(() => undefined);
    const handles = [...this.#handles.values()];
    this.#handles.clear();
    await Promise.all(handles.map((handle) => handle.close()));
  }
}
