/**
 * `npm start` as a child process: the real standalone server (Koishi, SQLite, the log persona) on a
 * port and data folder of the caller's choosing, its output captured. The reliability runs kill and
 * restart it; the overhead bench measures an active session against it.
 */
import { spawn, type ChildProcessByStdio } from "node:child_process";
import { createRequire } from "node:module";
import { copyFileSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import type { Readable } from "node:stream";
import type { Language } from "../common/locale.ts";
import { waitUntil } from "./wait.ts";

const STANDALONE = resolve(import.meta.dirname, "../server/standalone/start.ts");

/** `npm start` as a child process on `port` and `dataDir`, its output captured. */
export interface Standalone {
  child: ChildProcessByStdio<null, Readable, Readable>;
  baseUrl: string;
  /** Event ids of the blocks the log persona printed, in order: each is a hand-over. */
  injected: string[];
  output(): string;
  exited: Promise<void>;
  /** Ctrl-C: a clean stop. */
  stop(): Promise<void>;
  kill(): Promise<void>;
}

/**
 * Starts the standalone server and waits for its start text (the operator token line comes last).
 * Pipe writes are synchronous on Linux, so a block on stdout is a hand-over that happened.
 * `keepOutput: false` stops capturing once started (`injected` and `output()` stay as they were then).
 */
export async function spawnStandalone(dataDir: string, port: number, options: { keepOutput?: boolean; language?: Language } = {}): Promise<Standalone> {
  // The start text is read below, so its language is chosen here rather than left to the caller's locale.
  const language = options.language ?? "zh-CN";
  const env = { ...process.env, LC_ALL: language === "en-US" ? "en_US.UTF-8" : "zh_CN.UTF-8" };
  const child = spawn(process.execPath, [STANDALONE, "--port", String(port), "--data-dir", dataDir], { stdio: ["ignore", "pipe", "pipe"], env });
  const started = language === "en-US" ? { last: /Operator API/, url: /API: (http:\/\/\S+)/ } : { last: /运维接口（http/, url: /接口地址：(http:\/\/\S+)/ };
  const exited = new Promise<void>((done) => child.once("exit", () => done()));
  const injected: string[] = [];
  let output = "";
  let partial = "";
  child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
    output += chunk;
    const lines = (partial + chunk).split("\n");
    partial = lines.pop()!;
    for (const line of lines) {
      const match = /^\s*"event_id": "([^"]+)",$/.exec(line);
      if (match) injected.push(match[1]!);
    }
  });
  child.stderr.setEncoding("utf8").on("data", (chunk: string) => (output += chunk));
  const running = () => child.exitCode === null && child.signalCode === null;
  const signal = async (name: NodeJS.Signals) => {
    if (running()) child.kill(name);
    await exited;
  };
  const baseUrl = await waitUntil(
    () => {
      if (!running()) throw new Error(`the server exited: ${output}`);
      return started.last.test(output) ? started.url.exec(output)?.[1] : undefined;
    },
    () => `server start: ${output}`,
    30_000,
  ).catch(async (error: unknown) => {
    await signal("SIGKILL"); // a server that never said it started is not left running
    throw error;
  });
  if (options.keepOutput === false) {
    // Past the start text, read and drop: a caller that measures its own process (the bench) must
    // not pay for decoding and scanning every block the log persona prints.
    for (const stream of [child.stdout, child.stderr]) {
      stream.removeAllListeners("data");
      stream.resume();
    }
  }
  return { child, baseUrl, injected, output: () => output, exited, stop: () => signal("SIGINT"), kill: () => signal("SIGKILL") };
}

const sqlite = await (async () => {
  const init = createRequire(import.meta.url)("@minatojs/sql.js");
  return (init.default ?? init)() as Promise<{
    Database: new (path: string) => { exec(sql: string): { columns: string[]; values: unknown[][] }[]; close(): void };
  }>;
})();

/**
 * The rows a query finds in the server's SQLite file as it lies on disk (after a kill: what a
 * restart loads). Only for a server that has stopped: see `rowsOfRunningServer`.
 */
export function rowsOnDisk(dbPath: string, sql: string): Record<string, unknown>[] {
  const db = new sqlite.Database(dbPath);
  try {
    const [result] = db.exec(sql);
    return (result?.values ?? []).map((values) => Object.fromEntries(result!.columns.map((column, i) => [column, values[i]])));
  } finally {
    db.close();
  }
}

/**
 * The rows a query finds in a copy of the file of a server that is still running. Neither side's
 * SQLite takes file locks (sql.js), so a reader that opens the live file while the server is inside
 * a transaction takes the server's journal for a crash's and rolls it back on disk: receipts the
 * server had acknowledged vanished that way, and the server itself failed with "disk I/O error".
 * The copy has no journal; a copy taken mid-write may be unreadable, and then this throws.
 */
export function rowsOfRunningServer(dbPath: string, sql: string): Record<string, unknown>[] {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-db-copy-"));
  try {
    const copy = join(dir, "copy.db");
    copyFileSync(dbPath, copy);
    return rowsOnDisk(copy, sql);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
