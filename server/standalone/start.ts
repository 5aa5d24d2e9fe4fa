/** `npm start`: a standalone Koishi app with the plugin, SQLite under ./data, token files created once (0600),
 * and the log persona. Usage: npm start -- [--host] [--port] [--data-dir] [--config] [--help] */
import { chmodSync, closeSync, mkdirSync, openSync, readFileSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { join, resolve } from "node:path";
import { parseArgs } from "node:util";
import type { Context, ForkScope, Plugin } from "koishi";
import { z } from "zod";
import { errorText, isMissingFile } from "../../common/errors.ts";
import { LANGUAGES, localeLanguage, type Language } from "../../common/locale.ts";
import { API_BASE_PATH, CONSOLE_PAGE_PATH, LIMITS, formatIssues } from "../../protocol/wire.ts";
import { boundConnections, limitFrames } from "../http/connections.ts";
import { holdDatabaseFiles } from "../disk-sync.ts";
import { koishi } from "../koishi.ts";
import * as notifyWebhook from "../notify-webhook.ts";
import { DEFAULT_HOST, DEFAULT_PORT, PORT_RANGE, consoleHead, piInstructions, standaloneText, usage } from "./texts.ts";
import { closeConsolePages } from "../console/index.ts";
import { newPairingCode } from "../pairing/codes.ts";
import { localOrigin, pairingLink } from "../pairing/routes.ts";
import { signInUrl } from "../console/sign-in.ts";
import { MIN_TOKEN_CHARS, ensureToken, octal } from "../token-file.ts";

export { ensureToken } from "../token-file.ts";

/** `<data-dir>/server.json` (or `--config`): who hears direct events, and any extra Koishi plugins (the bot's adapter). */
export const StandaloneFile = z.strictObject({
  botId: z.string().default(""),
  recipientId: z.string().default(""),
  operatorToken: z.string().default(""),
  /** The language of everything this server says (start-up text, log, chat replies, direct notices); else LC_ALL / LANG. */
  language: z.enum(LANGUAGES).optional(),
  /** Koishi plugins to load before notify-webhook, by package name, e.g. `{"adapter-onebot": {...}}`. */
  plugins: z.record(z.string(), z.record(z.string(), z.unknown())).default({}),
  /** Other notify-webhook options (see its Config), e.g. `{"eventsPerMinute": 120}`. */
  notifyWebhook: z.record(z.string(), z.unknown()).default({}),
});
export type StandaloneFile = z.infer<typeof StandaloneFile>;

type StandaloneOptions = Exclude<ReturnType<typeof parseFlags>, "help">;

export function parseFlags(argv: string[], cwd: string, language: Language = localeLanguage(process.env)) {
  const { values } = parseArgs({
    args: argv,
    options: {
      host: { type: "string", default: DEFAULT_HOST },
      port: { type: "string", default: String(DEFAULT_PORT) },
      "data-dir": { type: "string", default: "data" },
      config: { type: "string" },
      help: { type: "boolean", short: "h", default: false },
    },
    strict: true,
  });
  if (values.help) return "help" as const;
  const port = Number(values.port);
  if (!Number.isInteger(port) || port < 1 || port > 65535) throw new Error(standaloneText(language).badPort(values.port));
  const dataDir = resolve(cwd, values["data-dir"]);
  return { host: values.host, port, dataDir, configPath: values.config ? resolve(cwd, values.config) : join(dataDir, "server.json") };
}

/** Makes the data folder 0700 and `koishi.db` 0600 (created empty if missing, so SQLite never creates it with the umask's mode). A folder or database others
 * could read or write is narrowed; returns one line for each change made, for the start-up output. */
export function secureDataDir(dataDir: string, language: Language = localeLanguage(process.env)): string[] {
  const text = standaloneText(language);
  const notes: string[] = [];
  const narrow = (path: string, mode: number, note: (path: string, mode: string) => string) => {
    const was = statSync(path).mode;
    if (!(was & 0o077)) return;
    chmodSync(path, mode);
    notes.push(note(path, octal(was)));
  };
  mkdirSync(dataDir, { recursive: true, mode: 0o700 });
  narrow(dataDir, 0o700, text.folderNarrowed);
  const database = join(dataDir, "koishi.db");
  closeSync(openSync(database, "a", 0o600));
  narrow(database, 0o600, text.databaseNarrowed);
  return notes;
}

/** A token written into the config file follows the token files' rules: at least `MIN_TOKEN_CHARS`
 * characters, and a file only its owner can read (a symlink's target is what is checked). */
function assertConfigTokenKept(path: string, file: StandaloneFile, language: Language): void {
  if (!file.operatorToken) return;
  const text = standaloneText(language);
  if (file.operatorToken.length < MIN_TOKEN_CHARS) throw new Error(text.weakConfigToken(path, file.operatorToken.length, MIN_TOKEN_CHARS));
  const mode = statSync(path).mode;
  if (mode & 0o077) throw new Error(text.openConfigFile(path, octal(mode)));
}

export function readStandaloneFile(path: string, language: Language = localeLanguage(process.env)): StandaloneFile {
  let raw: string;
  try {
    raw = readFileSync(path, "utf8");
  } catch (error) {
    if (isMissingFile(error)) return StandaloneFile.parse({});
    throw error;
  }
  const parsed = StandaloneFile.safeParse(JSON.parse(raw));
  if (!parsed.success) {
    const text = standaloneText(language);
    throw new Error(text.badConfigFile(path, formatIssues(parsed.error, text.configRoot)));
  }
  return parsed.data;
}

/** A plugin module's default export (or the module), undefined when it is not installed. */
function optionalPlugin(require: NodeJS.Require, name: string): Plugin<Context> | undefined {
  try {
    const module = require(name);
    return module.default ?? module;
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === "MODULE_NOT_FOUND") return undefined;
    throw error;
  }
}

function loadPlugin(name: string, cwd: string, language: Language): Plugin<Context> {
  const require = createRequire(join(cwd, "package.json"));
  for (const candidate of [`koishi-plugin-${name}`, `@koishijs/plugin-${name}`, name]) {
    const plugin = optionalPlugin(require, candidate);
    if (plugin) return plugin;
  }
  throw new Error(standaloneText(language).pluginNotFound(name));
}

/** `output.announce`: where the start-up text goes (console.log by default); the demo prints its own. */
export async function runStandalone(
  options: StandaloneOptions,
  cwd = process.cwd(),
  output: { announce?: (text: string) => void; language?: Language } = {},
): Promise<{ baseUrl: string; app: Context; language: Language; stop(): Promise<void> }> {
  const announce = output.announce ?? ((text: string) => console.log(text));
  const file = readStandaloneFile(options.configPath);
  const language = output.language ?? file.language ?? localeLanguage(process.env);
  for (const note of secureDataDir(options.dataDir, language)) announce(note);
  const tokenPath = join(options.dataDir, "token");
  const token = ensureToken(tokenPath);
  const operatorTokenPath = join(options.dataDir, "operator.token");
  assertConfigTokenKept(options.configPath, file, language);
  const operatorToken = file.operatorToken || ensureToken(operatorTokenPath);
  // The operator token opens more than the agents' one: the same string for both would give every agent the operator API.
  if (operatorToken && operatorToken === token) throw new Error(standaloneText(language).sameTokens);
  // The console page's sign-in: its own secret, so holding it opens neither API.
  const consoleTokenPath = join(options.dataDir, "console.token");
  const consoleToken = ensureToken(consoleTokenPath);
  // Printed below with the address, so the plugin takes it rather than logging one of its own.
  const pairingCode = newPairingCode();

  const require = createRequire(import.meta.url);
  // Koishi's instance language: the plugin's log lines, direct notices and chat replies (for anyone without a language of their own) follow it.
  const app = new koishi.Context({ i18n: { locales: [language, ...LANGUAGES.filter((other) => other !== language)] } });
  app.baseDir = cwd;
  const forks: ForkScope[] = [];
  const use = (plugin: Plugin<Context>, config?: unknown) => {
    forks.push((app.plugin.bind(app) as (plugin: Plugin<Context>, config?: unknown) => ForkScope)(plugin, config));
  };
  use(require("@koishijs/plugin-server").default, { host: options.host, port: options.port, maxPort: options.port + PORT_RANGE });
  // npm start owns this HTTP server (it is created now and listens at start), so it bounds what idle or slow clients can hold.
  const http = app.server._http;
  boundConnections(http);
  // Every WebSocket frame (the console's) within the largest body a route takes, before ws buffers it.
  app.server._ws.on("connection", (socket) => limitFrames(socket, LIMITS.operatorBodyBytes));
  // Koishi's http service: the chat commands fetch images the owner attaches with it.
  use(require("@koishijs/plugin-http").default);
  use(require("@minatojs/driver-sqlite").default, { path: join(options.dataDir, "koishi.db") });
  // The console is a development dependency: a clone has it, an install without it runs without the page.
  const consolePlugin = optionalPlugin(require, "@koishijs/plugin-console");
  if (consolePlugin) {
    use(consolePlugin, { open: false, head: consoleHead(language) });
    // The console's own start line names the page without its token; the one npm start prints signs in, and "/" lands on the page.
    koishi.Logger.levels.console = koishi.Logger.ERROR;
    app.server.get("/", (koa) => koa.redirect(CONSOLE_PAGE_PATH));
  }
  for (const [name, config] of Object.entries(file.plugins)) use(loadPlugin(name, cwd, language), config);
  use(notifyWebhook, {
    ...file.notifyWebhook,
    token,
    operatorToken,
    consoleToken,
    consoleAlone: true,
    pairingCode,
    botId: file.botId,
    recipientId: file.recipientId,
    logPersona: true,
  });
  await app.start();
  // npm start owns its database file too: no other process shares the connection (disk-sync.ts says what this saves).
  holdDatabaseFiles(app.database.drivers);
  await new Promise<void>((resolveReady) => app.on("server/ready", () => resolveReady()));
  const origin = localOrigin(options.host, app.server.port);
  const baseUrl = `${origin}${API_BASE_PATH}`;
  announce(piInstructions(baseUrl, pairingLink(origin, pairingCode), tokenPath, options.configPath, file, language));
  const signIn = signInUrl(`${origin}${CONSOLE_PAGE_PATH}`, consoleToken);
  if (consolePlugin) announce(standaloneText(language).console(signIn, consoleTokenPath, Boolean(file.notifyWebhook.consoleActions)));
  if (!file.operatorToken) announce(standaloneText(language).operatorToken(baseUrl, operatorTokenPath));

  return { baseUrl, app, language, stop: () => stopApp(app, forks, http) };
}

async function stopApp(app: Context, forks: ForkScope[], http: Context["server"]["_http"]): Promise<void> {
  await closeConsolePages(app);
  // plugin-server's dispose would stop listening and end only idle connections: one mid-request (a
  // slow body, a holder asking again) kept the stopped process alive, no timeout left to end it.
  http.close();
  http.closeAllConnections();
  // plugin-server's dispose throws once the logger is gone, so the forks go first, newest first.
  for (const fork of forks.reverse()) fork.dispose();
  await app.stop();
}

async function main(): Promise<void> {
  // Until server.json is read, the process locale is the only language there is.
  const envLanguage = localeLanguage(process.env);
  let options: ReturnType<typeof parseFlags>;
  try {
    options = parseFlags(process.argv.slice(2), process.cwd(), envLanguage);
  } catch (error) {
    console.error(standaloneText(envLanguage).invalidArgs(errorText(error)));
    console.error(usage(envLanguage));
    process.exitCode = 2;
    return;
  }
  if (options === "help") {
    console.log(usage(envLanguage));
    return;
  }
  const server = await runStandalone(options);
  const text = standaloneText(server.language);
  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) process.exit(130);
    stopping = true;
    console.log(text.stopping(signal));
    server.stop().then(
      () => console.log(text.stopped),
      (error: unknown) => {
        console.error(text.stopFailed, error);
        process.exitCode = 1;
      },
    );
  };
  process.on("SIGINT", () => shutdown("SIGINT"));
  process.on("SIGTERM", () => shutdown("SIGTERM"));
}

if (import.meta.main) {
  main().catch((error: unknown) => {
    console.error(standaloneText(localeLanguage(process.env)).startFailed(errorText(error)));
    process.exitCode = 1;
  });
}
