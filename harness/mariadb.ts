/**
 * A real MariaDB for the store tests: one `mariadbd` per test process in a temp folder, reached by
 * its Unix socket only, with a database per Koishi data folder (a harness restart finds its rows).
 */
import { type ChildProcess, execFile, spawn } from "node:child_process";
import { openSync, readFileSync, rmSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { basename, join } from "node:path";
import { promisify } from "node:util";
import { waitUntil } from "./wait.ts";

const run = promisify(execFile);

export interface MariaDbServer {
  user: string;
  socket: string;
}

let starting: Promise<MariaDbServer> | undefined;

/** Debian's packages; .ci/run installs them. */
const MISSING = "MariaDB is not installed: `apt-get install mariadb-server` (the store tests run on it as on SQLite)";

/** The process's MariaDB, started on first use and stopped when the process exits. */
export function mariaDb(): Promise<MariaDbServer> {
  starting ??= start();
  return starting;
}

async function start(): Promise<MariaDbServer> {
  const dir = await mkdtemp(join(tmpdir(), "anon-notify-mariadb-"));
  const socket = join(dir, "mariadb.sock");
  const common = ["--no-defaults", `--datadir=${join(dir, "data")}`, `--user=${process.getuid?.() === 0 ? "root" : (process.env.USER ?? "root")}`];
  try {
    await run("mariadb-install-db", [...common, "--auth-root-authentication-method=normal", "--skip-test-db"]);
  } catch (error) {
    await rm(dir, { recursive: true, force: true });
    throw new Error((error as NodeJS.ErrnoException).code === "ENOENT" ? MISSING : `mariadb-install-db failed: ${(error as Error).message}`);
  }
  // The log goes to a file, so no pipe keeps the test process alive after its tests.
  const logFile = join(dir, "mariadbd.log");
  const server: ChildProcess = spawn(
    "mariadbd",
    [...common, "--skip-networking", `--socket=${socket}`, "--skip-name-resolve", "--innodb-buffer-pool-size=32M", "--skip-log-bin"],
    { stdio: ["ignore", "ignore", openSync(logFile, "w")] },
  );
  let exited = false;
  server.once("exit", () => void (exited = true));
  process.once("exit", () => {
    server.kill("SIGKILL");
    // A SIGKILLed server leaves its folder; a sync removal is all an exit handler can do.
    rmSync(dir, { recursive: true, force: true });
  });
  server.unref();
  await waitUntil(
    async () => {
      if (exited) throw new Error(`mariadbd exited:\n${readFileSync(logFile, "utf8").slice(-4000)}`);
      return client(socket, "SELECT 1").then(
        () => true,
        () => false,
      );
    },
    "MariaDB accepting connections",
    60_000,
  );
  return { user: "root", socket };
}

function client(socket: string, sql: string) {
  return run("mariadb", ["--no-defaults", "-S", socket, "-uroot", "-e", sql]);
}

/** The database for one Koishi data folder, created when missing: a restart on the same folder keeps its rows. */
export async function databaseFor(dataDir: string): Promise<MariaDbServer & { database: string }> {
  const server = await mariaDb();
  const database = `anon_${basename(dataDir).replace(/[^A-Za-z0-9_]/g, "_")}`.slice(0, 64);
  await client(server.socket, `CREATE DATABASE IF NOT EXISTS \`${database}\` CHARACTER SET utf8mb4`);
  return { ...server, database };
}
