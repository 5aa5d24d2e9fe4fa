/**
 * Forces what the database wrote onto the disk before an acceptance is answered. The SQLite driver
 * (sql.js compiled to WebAssembly) writes through to the file but its fsync is a no-op, so a
 * written row sits in the OS cache: it survives a killed process, not a power cut. One
 * `fdatasync` of the database file covers every write made before it started, so the callers that
 * arrive while one runs share the next one (group commit): one sync per batch, not per row.
 * Drivers that are servers (MySQL, PostgreSQL) sync themselves; the memory driver has no file.
 */
import { open, type FileHandle } from "node:fs/promises";
import { setImmediate } from "node:timers/promises";

/** The database files a driver writes, found by what minato's SQLite driver exposes (`path`). */
export function databaseFiles(drivers: readonly unknown[]): string[] {
  const files: string[] = [];
  for (const driver of drivers) {
    const path = (driver as { path?: unknown } | null)?.path;
    if (typeof path === "string" && path !== "" && path !== ":memory:") files.push(path);
  }
  return files;
}

export class DiskSync {
  readonly #files: () => string[];
  readonly #handles = new Map<string, FileHandle>();
  /** The sync that has not started yet: every caller until it starts is covered by it. */
  #next: Promise<void> | undefined;
  #running: Promise<void> = Promise.resolve();
  #closed = false;

  /** `files` is asked at each sync, so a driver that starts later is still covered. */
  constructor(files: () => string[]) {
    this.#files = files;
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
    await Promise.all(this.#files().map(async (file) => (await this.#handle(file)).datasync()));
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

  /** Closes the files once the syncs under way are done. */
  async close(): Promise<void> {
    this.#closed = true;
    await this.#running.catch(() => undefined);
    const handles = [...this.#handles.values()];
    this.#handles.clear();
    await Promise.all(handles.map((handle) => handle.close()));
  }
}
