/**
 * The Koishi console in tests: `withConsole` loads the real @koishijs/plugin-console (and, when
 * asked, @koishijs/plugin-auth) into a test app, and `ConsoleSocket` speaks the console's own
 * WebSocket protocol as its page does: `data`/`patch` messages fill a store, and a call is
 * `{id, type, args}` answered by `{type: "response", body: {id, value, error}}`.
 */
import type { Language } from "../../common/locale.ts";
import { execFileSync } from "node:child_process";
import { randomBytes } from "node:crypto";
import { existsSync, mkdtempSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type Browser } from "playwright-core";
import { createRequire } from "node:module";
import type { TestContext } from "node:test";
import { WebSocket } from "undici";
import type { Context, Plugin } from "koishi";
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import { extensionEnv, writeUserConfig } from "../../harness/extension-env.ts";
import { freePort, startKoishi, type KoishiHarness, type KoishiOptions, type Use } from "../../harness/koishi.ts";
import { spawnStandalone, type Standalone } from "../../harness/standalone.ts";
import { makeRoot, startPi, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";
import { SIGN_IN_LISTENER, closeConsolePages, type ConsoleView } from "../../server/console/index.ts";
import type { ConsoleAnswer } from "../../server/console/actions.ts";
import { closeAll } from "../../harness/cleanup.ts";
import { ChangeWaiters, waitUntil } from "../../harness/wait.ts";

const require = createRequire(import.meta.url);
export const consolePlugin = require("@koishijs/plugin-console").default as Plugin<Context>;

/** The console as a Koishi install has it: page at `/`, WebSocket at `/status`, never opening a browser. */
export function withConsole(use: Use): void {
  use(consolePlugin, { open: false });
}

export const CONSOLE_WS_PATH = "/status";

export class ConsoleSocket {
  readonly store: Record<string, unknown> = {};
  /** Every data message the console pushed to this connection, in order. */
  readonly pushed: { key: string; value: unknown }[] = [];
  readonly #socket: WebSocket;
  readonly #waiters = new ChangeWaiters();
  readonly #responses = new Map<string, (body: { value?: unknown; error?: unknown }) => void>();
  #next = 0;
  closed = false;

  private constructor(socket: WebSocket) {
    this.#socket = socket;
    socket.addEventListener("message", (event) => {
      const message = JSON.parse(String(event.data)) as { type: string; body: { key?: string; value?: unknown; id?: string } };
      if (message.type === "data") {
        this.store[message.body.key!] = message.body.value;
        this.pushed.push({ key: message.body.key!, value: message.body.value });
      } else if (message.type === "response") this.#responses.get(message.body.id!)?.(message.body);
      this.#waiters.changed();
    });
    socket.addEventListener("close", () => {
      this.closed = true;
      this.#waiters.changed();
    });
  }

  /** Opens the console's WebSocket on `port`, with `Origin` set as a browser page on `origin` would. */
  static async open(port: number, origin?: string): Promise<ConsoleSocket> {
    const socket = new WebSocket(`ws://127.0.0.1:${port}${CONSOLE_WS_PATH}`, origin ? { headers: { origin } } : undefined);
    await new Promise<void>((resolve, reject) => {
      socket.addEventListener("open", () => resolve(), { once: true });
      socket.addEventListener("error", (event) => reject(new Error(`console socket: ${String((event as { message?: string }).message ?? "error")}`)), {
        once: true,
      });
    });
    return new ConsoleSocket(socket);
  }

  get view(): ConsoleView | undefined {
    return this.store.anonNotify as ConsoleView | undefined;
  }

  /** Calls a console listener; resolves with the raw `{value, error}` of the response. */
  raw(type: string, ...args: unknown[]): Promise<{ value?: unknown; error?: unknown }> {
    const id = `t${++this.#next}`;
    return new Promise((resolve) => {
      this.#responses.set(id, ({ value, error }) => {
        this.#responses.delete(id);
        resolve({ ...(value === undefined ? {} : { value }), ...(error === undefined ? {} : { error }) });
      });
      this.#socket.send(JSON.stringify({ id, type, args }));
    });
  }

  /** Presents the console token, as the page does once per connection. */
  signIn(token: string): Promise<ConsoleAnswer<{ via: string }>> {
    return this.call(SIGN_IN_LISTENER, { token });
  }

  /** Calls one of the page's listeners, which answer values, never errors. */
  async call<T = unknown>(type: string, input: unknown): Promise<ConsoleAnswer<T>> {
    const body = await this.raw(type, input);
    if (body.error !== undefined) throw new Error(`console answered an error to ${type}: ${String(body.error)}`);
    return body.value as ConsoleAnswer<T>;
  }

  /** Waits for the page's data to satisfy `check`, for at most `ms`; names what never happened. */
  async until<T>(check: (view: ConsoleView) => T | undefined | false, what: string, ms = 5_000): Promise<T> {
    const deadline = Date.now() + ms;
    for (;;) {
      const view = this.view;
      const value = view ? check(view) : undefined;
      if (value !== undefined && value !== false) return value as T;
      const left = deadline - Date.now();
      if (left <= 0 || this.closed) throw new Error(`never happened within ${ms} ms: ${what}`);
      await this.#waiters.next(left);
    }
  }

  /** Closes and waits until the server has seen it. */
  async close(): Promise<void> {
    if (this.closed) return;
    const closed = new Promise<void>((resolve) => this.#socket.addEventListener("close", () => resolve(), { once: true }));
    this.#socket.close();
    await closed;
  }
}

export interface ConsoleStage {
  koishi: KoishiHarness;
  port: number;
  /** The console token the plugin was given (`consoleToken`). */
  token: string;
  /** Closes every page's socket and restarts the app with these plugin options (a new console token, say). */
  restart(config: Partial<NonNullable<KoishiOptions["config"]>>): Promise<void>;
  /** Opens a console page's socket; it is closed before the app stops. */
  open(origin?: string): Promise<ConsoleSocket>;
  /** Opens a socket and signs it in with the console token. */
  openSignedIn(origin?: string): Promise<ConsoleSocket>;
  /** Opens a real Pi session with the extension switched on; it is disposed with the stage. */
  openPi(tools?: ToolDefinition[], options?: Pick<StartPiOptions, "ui">): Promise<{ pi: PiHarness; sessionId: string }>;
}

/** A real Pi session in `root` with the extension switched on, kept in `harnesses` to dispose. */
async function openPiIn(
  root: string,
  harnesses: PiHarness[],
  tools: ToolDefinition[] = [],
  options: Pick<StartPiOptions, "ui"> = {},
): Promise<{ pi: PiHarness; sessionId: string }> {
  const pi = await startPi({ root, tools, ...options });
  harnesses.push(pi);
  await pi.prompt("/anon-notify");
  return { pi, sessionId: pi.session.sessionManager.getSessionId() };
}

/**
 * A Koishi app with the console and notify-webhook (plus `plugins`), and the environment that points
 * real Pi sessions at it. Everything is stopped and removed after the test.
 */
export async function consoleStage(
  t: TestContext,
  options: { config?: KoishiOptions["config"]; plugins?: KoishiOptions["plugins"]; userConfig?: Record<string, unknown> } = {},
): Promise<ConsoleStage> {
  const token = randomBytes(32).toString("hex");
  const koishi = await startKoishi({
    config: { consoleToken: token, ...options.config },
    plugins: async (use, app) => {
      withConsole(use);
      await options.plugins?.(use, app);
    },
  });
  const root = makeRoot();
  if (options.userConfig) writeUserConfig(root, options.userConfig);
  const saved = { ...process.env };
  Object.assign(process.env, extensionEnv(koishi, root));
  const harnesses: PiHarness[] = [];
  const sockets: ConsoleSocket[] = [];
  const clients = () => Object.keys((koishi.app.get("console") as { clients?: object } | undefined)?.clients ?? {}).length;
  // Every step runs even if one before it failed, so a failed test leaves no app running.
  t.after(() =>
    closeAll(
      // Pages first: the console refreshes its open pages while it is being disposed, and fails doing so.
      () => Promise.all(sockets.map((socket) => socket.close())),
      () => closeConsolePages(koishi.app),
      () => waitUntil(() => clients() === 0, "the console saw its pages close"),
      ...harnesses.reverse().map((pi) => () => pi.dispose({ keepRoot: true })),
      koishi.stop,
      () => {
        process.env = saved;
        rmSync(root, { recursive: true, force: true });
      },
    ),
  );
  const stage: ConsoleStage = {
    koishi,
    port: Number(new URL(koishi.baseUrl).port),
    token,
    async restart(config) {
      await Promise.all(sockets.map((socket) => socket.close()));
      await closeConsolePages(koishi.app);
      await koishi.restart(config);
    },
    async open(origin) {
      const socket = await ConsoleSocket.open(Number(new URL(koishi.baseUrl).port), origin);
      sockets.push(socket);
      return socket;
    },
    async openSignedIn(origin) {
      const socket = await stage.open(origin);
      const answer = await socket.signIn(token);
      if (!answer.ok) throw new Error(`the console token was refused: ${answer.error}`);
      return socket;
    },
    openPi: (tools, options) => openPiIn(root, harnesses, tools, options),
  };
  return stage;
}

/** The console's sign-in link `npm start` printed (Chinese start text), once it has. */
export function printedConsoleLink(server: Standalone, timeoutMs = 20_000): Promise<URL> {
  return waitUntil(
    () => {
      const link = /(?:控制台“Pi 会话”页面（打开此链接即登录）：|Console "Pi sessions" page \(this link signs you in\): )(http:\/\/\S+)/.exec(
        server.output(),
      )?.[1];
      return link ? new URL(link) : undefined;
    },
    () => `the console link in: ${server.output()}`,
    timeoutMs,
  );
}

export interface StandaloneConsole {
  server: Standalone;
  /** The link `npm start` printed: the page's address with the console token. */
  link: URL;
  /** The agents' token, read from the data folder. */
  agentToken: string;
  /** Stops `npm start`, deletes the console token file and starts it again on the same port and folder: a new token. */
  rotate(): Promise<void>;
  /** Stops `npm start` and starts it again on the same port and folder: the same token, unless `newToken`. */
  restart(options?: { newToken?: boolean }): Promise<void>;
  /** Opens a real Pi session with the extension switched on, pointed at this server; disposed with the test. */
  openPi(tools?: ToolDefinition[], options?: Pick<StartPiOptions, "ui">): Promise<{ pi: PiHarness; sessionId: string }>;
}

/**
 * `npm start` as a person runs it (a child process on a free port and a temp data folder) and the
 * environment that points real Pi sessions at it. Everything is stopped and removed after the test.
 */
/** `language` is the server's (its locale), which under npm start also decides the page's. */
export async function standaloneConsole(t: TestContext, language?: Language): Promise<StandaloneConsole> {
  const dataDir = mkdtempSync(join(tmpdir(), "anon-notify-console-"));
  const root = makeRoot();
  const saved = { ...process.env };
  const harnesses: PiHarness[] = [];
  const port = await freePort();
  const state = { server: await spawnStandalone(dataDir, port, language ? { language } : {}) };
  t.after(() =>
    closeAll(
      ...harnesses.reverse().map((pi) => () => pi.dispose({ keepRoot: true })),
      () => state.server.stop(),
      () => {
        process.env = saved;
        rmSync(root, { recursive: true, force: true });
        rmSync(dataDir, { recursive: true, force: true });
      },
    ),
  );
  const agentToken = readFileSync(join(dataDir, "token"), "utf8").trim();
  Object.assign(process.env, extensionEnv({ baseUrl: state.server.baseUrl, token: agentToken }, root));
  const stage: StandaloneConsole = {
    get server() {
      return state.server;
    },
    link: await printedConsoleLink(state.server),
    agentToken,
    rotate: () => stage.restart({ newToken: true }),
    async restart({ newToken = false } = {}) {
      await state.server.stop();
      if (newToken) rmSync(join(dataDir, "console.token"));
      state.server = await spawnStandalone(dataDir, port, language ? { language } : {});
      stage.link = await printedConsoleLink(state.server);
    },
    openPi: (tools, options) => openPiIn(root, harnesses, tools, options),
  };
  return stage;
}

const repo = join(import.meta.dirname, "..", "..");

/** Debian's Chromium (or CHROMIUM_PATH) for the page in a real browser, if installed. */
export const CHROMIUM = [process.env.CHROMIUM_PATH, "/usr/bin/chromium", "/usr/bin/chromium-browser"].find((path): path is string =>
  Boolean(path && existsSync(path)),
);
/** `skip` for the browser tests: false, or why they cannot run here. */
export const CHROMIUM_SKIP = CHROMIUM
  ? false
  : "no Chromium found (CHROMIUM_PATH, /usr/bin/chromium): install Debian's `chromium` to run the console page in a browser";

/**
 * The built page (built first when stale) and a headless Chromium, closed after the test. Launch it
 * before the stage, so it closes first: the app stops only once its pages are gone.
 */
export async function consoleBrowser(t: TestContext): Promise<Browser> {
  execFileSync(process.execPath, [join(repo, "scripts", "build-console.ts"), "--if-stale"], { cwd: repo, stdio: "pipe" });
  const browser = await chromium.launch({ executablePath: CHROMIUM!, args: ["--no-sandbox"] });
  t.after(() => browser.close());
  return browser;
}
