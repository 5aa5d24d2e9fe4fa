/**
 * Starts a real Koishi app for server tests: plugin-server on a free 127.0.0.1 port, a database
 * (SQLite in a temp folder by default, or minato's memory driver, or none), and the notify-webhook plugin. `restart()` stops everything and starts a new app on
 * the same port and database, as a process restart would; `stop()` also removes the temp folder.
 */
import { randomBytes } from "node:crypto";
import { mkdtemp, rm } from "node:fs/promises";
import { createRequire } from "node:module";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { Context, ForkScope, Plugin } from "koishi";
import { koishi } from "../server/koishi.ts";
import * as notifyWebhook from "../server/notify-webhook.ts";
import { API_BASE_PATH } from "../protocol/wire.ts";
import { closeAll } from "./cleanup.ts";
import { databaseFor } from "./mariadb.ts";
import { waitUntil } from "./wait.ts";

const require = createRequire(import.meta.url);
// CommonJS builds, so they share koishi's copy of cordis (see server/koishi.ts).
const serverPlugin = require("@koishijs/plugin-server").default as Plugin<Context>;
const sqlitePlugin = require("@minatojs/driver-sqlite").default as Plugin<Context>;
const memoryPlugin = require("@minatojs/driver-memory").default as Plugin<Context>;
const mysqlPlugin = require("@minatojs/driver-mysql").default as Plugin<Context> & { prototype: { getIndexes?: unknown } };
// The registry's newest driver-mysql for minato 3 (3.3.0) predates minato 3.7's index API, which
// asks every driver for a table's indexes; the plugin's tables declare none, so none is exact.
mysqlPlugin.prototype.getIndexes ??= async () => [];

/** How long a start or restart may take by default to listen and load its state on a busy 2-core machine. */
const READY_MS = 30_000;

export type Use = (plugin: Plugin<Context>, config?: unknown) => ForkScope;

/** The minato drivers the plugin is tested on; `none` starts without a `database` service. */
export type DatabaseDriver = "sqlite" | "mysql" | "memory" | "none";
export const DATABASE_DRIVERS: readonly Exclude<DatabaseDriver, "none">[] = ["sqlite", "mysql", "memory"];

/** Loads the driver's plugin; SQLite keeps its file in `dataDir`, MariaDB a database named after it. */
export async function useDatabase(use: Use, driver: Exclude<DatabaseDriver, "none">, dataDir: string): Promise<ForkScope> {
  if (driver === "sqlite") return use(sqlitePlugin, { path: join(dataDir, "koishi.db") });
  if (driver === "memory") return use(memoryPlugin, {});
  const { socket, user, database } = await databaseFor(dataDir);
  return use(mysqlPlugin, { socketPath: socket, user, password: "", database });
}

export interface KoishiOptions {
  /** Plugin config beyond the token; merged over the defaults of the Config schema. */
  config?: Partial<notifyWebhook.Config>;
  /** Loads extra plugins (mock bots, persona stand-ins) before notify-webhook; runs again on restart. */
  plugins?: (use: Use, app: Context) => void | Promise<void>;
  /** Keep notify-webhook out (to load it differently). */
  withoutPlugin?: boolean;
  /** Reuse a folder (its database survives); default: a fresh temp folder removed by stop(). */
  dataDir?: string;
  /** Koishi's instance languages in fallback order (its `i18n.locales` setting); Koishi's default when absent. */
  locales?: string[];
  /** Default `ANON_NOTIFY_DB` or `sqlite`. The memory driver's data does not survive `restart()`. */
  database?: DatabaseDriver;
  /** How long a start or restart may take before it fails (and stops what it started); default 30 s. */
  readyMs?: number;
}

export interface KoishiHarness {
  baseUrl: string;
  token: string;
  dataDir: string;
  app: Context;
  /** Stops the app and starts a new one on the same port and database. */
  restart(overrides?: Partial<notifyWebhook.Config>): Promise<void>;
  stop(): Promise<void>;
}

/** `ANON_NOTIFY_DB=memory` runs every Koishi test on minato's memory driver instead of SQLite. */
function defaultDriver(): DatabaseDriver {
  const named = process.env.ANON_NOTIFY_DB ?? "sqlite";
  if (!(DATABASE_DRIVERS as readonly string[]).includes(named)) throw new Error(`ANON_NOTIFY_DB must be one of ${DATABASE_DRIVERS.join(", ")}`);
  return named as DatabaseDriver;
}

export async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, "127.0.0.1", resolve));
  const address = probe.address();
  await new Promise<void>((resolve) => probe.close(() => resolve()));
  if (!address || typeof address === "string") throw new Error("no port");
  return address.port;
}

export async function startKoishi(options: KoishiOptions = {}): Promise<KoishiHarness> {
  const ownsDir = !options.dataDir;
  const dataDir = options.dataDir ?? (await mkdtemp(join(tmpdir(), "anon-notify-koishi-")));
  const port = await freePort();
  const token = randomBytes(24).toString("hex");
  const database = options.database ?? defaultDriver();
  const readyMs = options.readyMs ?? READY_MS;
  let pluginConfig: Partial<notifyWebhook.Config> = { ...options.config };
  let running: { app: Context; forks: ForkScope[] } | undefined;
  try {
    running = await boot();
  } catch (error) {
    if (ownsDir) await rm(dataDir, { recursive: true, force: true });
    throw error;
  }

  /** Starts an app; one that fails to become ready is stopped before the error goes up, so no app outlives its test. */
  async function boot() {
    const app = new koishi.Context(options.locales ? { i18n: { locales: options.locales } } : {});
    app.baseDir = dataDir;
    const forks: ForkScope[] = [];
    const plugin = app.plugin.bind(app) as (plugin: Plugin<Context>, config?: unknown) => ForkScope;
    const use: Use = (target, config) => {
      const fork = plugin(target, config);
      forks.push(fork);
      return fork;
    };
    let ready = false;
    app.on("server/ready", () => void (ready = true));
    try {
      use(serverPlugin, { host: "127.0.0.1", port });
      if (database !== "none") await useDatabase(use, database, dataDir);
      await options.plugins?.(use, app);
      if (!options.withoutPlugin) use(notifyWebhook, { ...pluginConfig, token });
      await app.start();
      await waitUntil(() => ready, `Koishi listening on port ${port}`, readyMs);
      if (!options.withoutPlugin && database !== "none") await untilReady(`http://127.0.0.1:${port}${API_BASE_PATH}`, token, readyMs);
    } catch (error) {
      await shutdown({ app, forks }).catch(() => {}); // the start's own error is the one to report
      throw error;
    }
    return { app, forks };
  }

  function shutdown(target: { app: Context; forks: ForkScope[] }) {
    // plugin-server's own dispose throws once the logger is gone, so dispose forks before app.stop();
    // the app stops even if a fork's dispose throws.
    return closeAll(...target.forks.reverse().map((fork) => () => fork.dispose()), () => target.app.stop());
  }

  /** Stops the running app, if any; after a failed restart there is none. */
  async function stopRunning() {
    const current = running;
    running = undefined;
    if (current) await shutdown(current);
  }

  const harness: KoishiHarness = {
    baseUrl: `http://127.0.0.1:${port}${API_BASE_PATH}`,
    token,
    dataDir,
    app: running.app,
    async restart(overrides) {
      await stopRunning();
      pluginConfig = { ...pluginConfig, ...overrides };
      running = await boot();
      harness.app = running.app;
    },
    stop: () => closeAll(stopRunning, () => ownsDir && rm(dataDir, { recursive: true, force: true })),
  };
  return harness;
}

/** Waits while the plugin answers 503 (its state is still loading) or the port refuses (a busy machine). */
async function untilReady(baseUrl: string, token: string, readyMs: number): Promise<void> {
  let last = "no answer yet";
  await waitUntil(
    async () => {
      try {
        const response = await fetch(`${baseUrl}/health`, { headers: { authorization: `Bearer ${token}` }, signal: AbortSignal.timeout(readyMs) });
        await response.arrayBuffer();
        last = `HTTP ${response.status}`;
        return response.status !== 503;
      } catch (error) {
        last = String(error);
        return false;
      }
    },
    () => `notify-webhook ready at ${baseUrl} (last: ${last})`,
    readyMs,
  );
}

interface LogRecord {
  type: string;
  name: string;
  content: string;
}

/** The plugin's warnings (and its info lines) as Koishi logs them, from now until `stop`. */
export function captureLog(): { warnings: () => string[]; infos: () => string[]; stop: () => void } {
  const records: LogRecord[] = [];
  const target = { colors: 0, record: (record: LogRecord) => records.push(record) };
  const targets = (koishi.Logger as unknown as { targets: object[] }).targets;
  targets.push(target);
  return {
    warnings: () => records.filter((record) => record.name === "notify-webhook" && record.type === "warn").map((record) => record.content),
    infos: () => records.filter((record) => record.name === "notify-webhook" && record.type === "info").map((record) => record.content),
    stop: () => void targets.splice(targets.indexOf(target), 1),
  };
}

/**
 * A Koishi app on `driver` without the plugin, and what `build` makes from a context once the
 * database is there (stores built as the plugin builds them); stopped after the test.
 */
export async function startWithDatabase<T>(
  t: { after: (fn: () => Promise<void>) => void },
  driver: Exclude<DatabaseDriver, "none">,
  build: (ctx: Context) => T,
): Promise<T> {
  let built: T | undefined;
  const server = await startKoishi({
    database: driver,
    withoutPlugin: true,
    plugins: (use) => {
      use({
        name: "parts",
        inject: ["database"],
        apply(ctx: Context) {
          built = build(ctx);
        },
      });
    },
  });
  t.after(() => server.stop());
  return waitUntil(() => built, "the parts built once the database is there");
}
