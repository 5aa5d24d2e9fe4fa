/** The owner's page in the Koishi console (optional service): data pushed to every open page, timeline
 * reads and actions. Access: plugin-auth at `authority`, else the console token, else `consoleActions`. */
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, symlinkSync, readlinkSync, rmSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, sep } from "node:path";
import type { Context } from "koishi";
import { z } from "zod";
import type { Client, DataService as DataServiceType } from "@koishijs/plugin-console";
import { APPROVAL_LIMITS } from "../../protocol/approvals.ts";
import { AUDIT_PAGE_MAX, AuditQuery, type AuditEntry } from "../../protocol/audit.ts";
import { Id } from "../../protocol/wire.ts";
import type { CommandSummary } from "../../protocol/queue.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventStore } from "../events/store.ts";
import { instanceSay, instanceText, type Say } from "../locales/load.ts";
import { packageRoot } from "../package-root.ts";
import { projectSession, type SessionRegistry } from "../sessions/registry.ts";
import { sessionRuns } from "./run-rules.ts";
import { ConsoleSignInInput, consoleTokenFromFile, signedInOn, tokenMatches, type SignIn } from "./sign-in.ts";
import { CONSOLE_ACTIONS, answer, auditAction, type ConsoleActionDeps, type ConsoleAnswer } from "./actions.ts";
import { errorText } from "../../common/errors.ts";
import {
  BOARD_LIMITS,
  actionGate,
  boardAudited,
  boardGone,
  boardPruned,
  boardRecorded,
  boardView,
  consoleApproval,
  originDecision,
  timelineLines,
  type ActionGate,
  type Board,
  type TimelineItem,
} from "./decisions.ts";

const FEED_KEY = "anonNotify";
const TIMELINE_PUSHED = 50;
const COMMANDS_PER_SESSION = 10;
const REFRESH_THROTTLE_MS = 150;
/** Mark this page's data and listeners, so the checks here touch nothing else; the sign-in listeners are
 * origin-checked like the rest, but open to connections not signed in yet. */
const SURFACE = Symbol.for("anon-notify.console");
const SIGN_IN = Symbol.for("anon-notify.console.sign-in");
export const SIGN_IN_LISTENER = "anon-notify/sign-in";
export const SIGN_OUT_LISTENER = "anon-notify/sign-out";
/** Refused sign-ins are logged once per this long, with their count. */
const REFUSED_LOG_MS = 60_000;

type PageData = Awaited<ReturnType<typeof pageData>>;
export type ConsoleView = PageData & { actions: ActionGate };

declare module "@koishijs/console" {
  namespace Console {
    interface Services {
      [FEED_KEY]: DataServiceType<ConsoleView | null>;
    }
  }
}

export interface ConsolePageDeps extends ConsoleActionDeps {
  registry: SessionRegistry;
  audit: AuditLog;
  events: EventStore;
  /** `openToAll` (`consoleActions`) and `token` (empty: the plugin's own token file) apply without plugin-auth,
   * `authority` with it; `origins` besides the console's own; `alone`: `npm start` serves this page alone, so a
   * connection not signed in gets only the console's entry (the sign-in form), none of Koishi's own data. */
  options: { openToAll: boolean; token: string; authority: number; origins: string[]; alone: boolean };
}
type ConsolePageOptions = ConsolePageDeps["options"];

type AuthedClient = Client & { auth?: { authority: number; name?: string } | null };
type Logger = ReturnType<Context["logger"]>;

export const ConsolePage = {
  name: "notify-webhook-console",
  reusable: true,
  apply(ctx: Context, deps: ConsolePageDeps) {
    ctx.inject(["console"], (ctx) => {
      const logger = ctx.logger("notify-webhook");
      const access = pageAccess(ctx, logger, deps.options);
      const feed = startFeed(ctx, logger, deps, access);
      guardListeners(ctx, logger, deps.options, access);
      listenActions(ctx, deps, access, feed);
      listenSignIn(ctx, logger, deps.audit, access);
      const files = pageFiles(logger, instanceSay(ctx));
      if (files) ctx.console.addEntry(files);
    });
  },
};

type PageAccess = ReturnType<typeof pageAccess>;

function pageAccess(ctx: Context, logger: Logger, options: ConsolePageOptions) {
  // The plugin's own token when its config names none: the page's address is logged, never the token.
  const ownPath = join(ctx.baseDir, "data", "notify-webhook", "console.token");
  if (!options.token) logger.info(instanceText(ctx, "anon-notify.console-log.sign-in", { path: ownPath }));
  const token = options.token || consoleTokenFromFile(ownPath);
  if (options.openToAll && !ctx.get("auth")) logger.warn(instanceText(ctx, "anon-notify.console-log.open-to-all", {}));
  // A new connection (a reload, a restart) signs in again.
  const signedIn = new WeakMap<Client, SignIn>();
  const gateFor = (client: AuthedClient) =>
    actionGate({
      authInstalled: Boolean(ctx.get("auth")),
      authority: client.auth ? client.auth.authority : null,
      required: options.authority,
      signedIn: signedIn.has(client),
      openToAll: options.openToAll,
    });
  const who = (client: AuthedClient): Record<string, unknown> => ({
    id: client.id,
    user: client.auth?.name ?? null,
    sign_in: signedIn.get(client) ?? null,
    address: client.request?.socket.remoteAddress ?? null,
    origin: client.request?.headers.origin ?? null,
  });
  return { feedOptions: { authority: options.authority, [SURFACE]: true as const }, token, signedIn, gateFor, who };
}

/** The page's data service: what every open page shows, rebuilt (throttled) after each change. */
function startFeed(ctx: Context, logger: Logger, deps: ConsolePageDeps, { feedOptions, gateFor }: PageAccess) {
  const { registry, operator, audit } = deps;
  const { DataService } = createRequire(import.meta.url)("@koishijs/plugin-console") as { DataService: typeof DataServiceType };

  let board = registry.list().reduce<Board>((b, p) => boardRecorded(b, p, registry.find(p.session_id)?.heartbeat.activity ?? null, Date.now()), new Map());
  const boardNow = () => board;
  let version = 0;
  let cached: { version: number; view: Promise<PageData> } | undefined;
  let lastView: PageData | undefined;

  class Feed extends DataService<ConsoleView | null> {
    constructor(ctx: Context) {
      super(ctx, FEED_KEY, feedOptions);
    }

    override async get(_forced: boolean, client: Client): Promise<ConsoleView | null> {
      if (cached?.version !== version) {
        board = boardPruned(board, Date.now(), BOARD_LIMITS);
        cached = { version, view: pageData(deps, boardNow) };
      }
      try {
        lastView = await cached.view;
      } catch (error) {
        // Unawaited by the console, so caught here: a read still running when the app stops finds the database gone.
        if (ctx.scope.isActive) logger.warn(instanceText(ctx, "anon-notify.console-log.data", { error: errorText(error) }));
        cached = undefined;
      }
      return lastView ? { ...lastView, actions: gateFor(client) } : null;
    }
  }
  ctx.plugin(Feed);
  const changed = ctx.throttle(() => {
    version++;
    void ctx.get(`console.services.${FEED_KEY}`)?.refresh();
  }, REFRESH_THROTTLE_MS);

  ctx.effect(() =>
    registry.onChange((change) => {
      const { heartbeat } = change.entry;
      board =
        change.kind === "recorded"
          ? boardRecorded(board, projectSession(change.entry), heartbeat.activity ?? null, change.entry.lastSeenMs)
          : boardGone(board, heartbeat.session_id, change.kind === "removed" ? "offline" : "expired", Date.now());
      changed();
    }),
  );
  // Every change the page shows leaves an audit row, except a mute whose time runs out.
  ctx.effect(() =>
    audit.onRecord((entry) => {
      board = boardAudited(board, entry);
      changed();
    }),
  );
  ctx.effect(() => operator.onMuteEnd(changed));
  return { changed, items: (entries: AuditEntry[]) => timelineItems(deps.events, entries, boardNow) };
}

async function pageData({ operator, approvals, grants, events }: ConsolePageDeps, board: () => Board) {
  const commands = new Map<string, CommandSummary[]>();
  for (const sessionId of board().keys()) commands.set(sessionId, await operator.commands(sessionId, COMMANDS_PER_SESSION));
  const page = await operator.audit({ limit: TIMELINE_PUSHED });
  const [status, open, live] = await Promise.all([
    operator.status(),
    approvals.list({ state: "open", limit: APPROVAL_LIMITS.listMax }),
    grants.list({ state: "live", limit: APPROVAL_LIMITS.listMax }),
  ]);
  // Running mutes (all-sessions first) and the notices they hold; open approvals (pending, or decided and on their way).
  return {
    sessions: boardView(board(), commands),
    mutes: status.mutes,
    held: status.held,
    approvals: open.map(consoleApproval),
    grants: live,
    timeline: await timelineItems(events, page.entries, board),
    server_time: new Date().toISOString(),
  };
}

async function timelineItems(events: EventStore, entries: AuditEntry[], board: () => Board): Promise<TimelineItem[]> {
  const eventIds = entries.filter((entry) => entry.action === "event.accepted" && entry.subject).map((entry) => entry.subject!);
  return timelineLines(entries, await events.many(eventIds), board());
}

/** Refuses this page's listeners to pages of other sites, and without plugin-auth to connections the gate refuses. */
function guardListeners(ctx: Context, logger: Logger, options: ConsolePageOptions, { gateFor }: PageAccess): void {
  ctx.on("console/intercept", (client, listener) => {
    const marks = listener as { [SURFACE]?: boolean; [SIGN_IN]?: boolean; callback?: unknown };
    if (!marks[SURFACE] && !marks[SIGN_IN]) {
      // Data, not a call (`ping` keeps the page connected); the entry loads the sign-in form.
      const koishiData = !marks.callback && listener !== ctx.get("console.services.entry")?.options;
      return options.alone && koishiData && !ctx.get("auth") && !gateFor(client).allowed;
    }
    const selfUrl = (ctx.console as { config?: { selfUrl?: string } }).config?.selfUrl;
    const headers = client.request?.headers ?? {};
    const decision = originDecision(headers.origin, headers.host, [...options.origins, ...(selfUrl ? [selfUrl] : [])]);
    if (!decision.allowed) {
      logger.warn(instanceText(ctx, "anon-notify.console-log.refused", { origin: headers.origin ?? "?", reason: decision.reason }));
      return true;
    }
    // With plugin-auth, its own intercept has decided by `authority` already.
    return Boolean(marks[SURFACE]) && !ctx.get("auth") && !gateFor(client).allowed;
  });
}

/** The console keeps listeners until overwritten; a disposed plugin's must not answer with stale services. */
function addListener(ctx: Context, name: string, options: object, callback: (client: AuthedClient, raw: unknown) => Promise<ConsoleAnswer>): void {
  const listener = function (this: Client, raw: unknown) {
    return callback(this, raw);
  };
  (ctx.console.addListener as (name: string, callback: unknown, options: object) => void)(name, listener, options);
  ctx.on("dispose", () => {
    if (ctx.console.listeners[name]?.callback === listener) delete ctx.console.listeners[name];
  });
}

function listenActions(ctx: Context, deps: ConsolePageDeps, { feedOptions, gateFor, who }: PageAccess, { changed, items }: ReturnType<typeof startFeed>): void {
  const { operator, audit, starts } = deps;
  for (const [name, action] of Object.entries(CONSOLE_ACTIONS)) {
    addListener(ctx, name, feedOptions, async (client, raw) => {
      const gate = gateFor(client);
      // Who acts: `console`, or `console:<login>` with plugin-auth (an approval records who decided).
      const caller = client.auth?.name ? `console:${client.auth.name}` : "console";
      const result = gate.allowed
        ? await audit.as("console", () => answer(action.input, raw, (input) => action.run(deps, input, caller)))
        : ({ ok: false, error: gate.reason } as const);
      await auditAction(audit, name, raw, result, who(client));
      if (result.ok) changed();
      return result;
    });
  }
  // Reads: allowed wherever the console's data is.
  const read = <I extends z.ZodType>(name: string, input: I, run: (value: z.infer<I>) => Promise<unknown>) =>
    addListener(ctx, name, feedOptions, (_client, raw) => answer(input, raw, run));
  read("anon-notify/timeline", AuditQuery, async (query) => {
    const page = await operator.audit(query);
    return { entries: await items(page.entries), next_before: page.next_before };
  });
  read("anon-notify/session", z.strictObject({ session_id: Id }), async ({ session_id }) => {
    // The newest rows of the two kinds a run is made of, read in full: the events' bodies and the commands' states.
    const [notices, commands] = await Promise.all([
      operator.audit({ session_id, kind: "event", limit: AUDIT_PAGE_MAX }),
      operator.audit({ session_id, kind: "command", limit: AUDIT_PAGE_MAX }),
    ]);
    return { session_id, runs: sessionRuns([...notices.entries, ...commands.entries]) };
  });
  read("anon-notify/hosts", z.strictObject({}), async () => ({ hosts: starts.hosts() }));
  read("anon-notify/entry", z.strictObject({ id: z.number().int().positive().max(Number.MAX_SAFE_INTEGER) }), async ({ id }) => {
    const [entry] = (await operator.audit({ before: id + 1, limit: 1 })).entries;
    return entry?.id === id ? entry : null;
  });
}

function listenSignIn(ctx: Context, logger: Logger, audit: AuditLog, { token, signedIn, gateFor, who }: PageAccess): void {
  let refused = 0;
  const reportRefused = ctx.throttle(() => {
    logger.warn(instanceText(ctx, "anon-notify.console-log.wrong-tokens", { count: refused }));
    refused = 0;
  }, REFUSED_LOG_MS);
  addListener(ctx, SIGN_IN_LISTENER, { [SIGN_IN]: true }, async (client, raw) => {
    const gate = gateFor(client);
    if (gate.allowed) return { ok: true, value: { via: gate.via } };
    if (ctx.get("auth")) return { ok: false, error: gate.reason };
    const parsed = ConsoleSignInInput.safeParse(raw);
    if (!parsed.success || !tokenMatches(parsed.data.token, token)) {
      // An empty token is a page asking whether it needs one, not a guess.
      if (!parsed.success || parsed.data.token) {
        refused++;
        reportRefused();
      }
      return { ok: false, error: "bad_token" };
    }
    signedIn.set(client, signedInOn(client.request?.socket, token, Date.now()));
    await audit.record({
      actor: "console",
      action: "console.sign_in",
      session_id: null,
      subject: signedIn.get(client)!.id,
      data: { status: "ok", client: who(client) },
    });
    // Its data pushed again: all of it after a sign-in, `null` for what it may no longer see after a sign-out.
    client.refresh();
    return { ok: true, value: { via: "token" } };
  });
  // Ends this connection's token sign-in (the page forgets the token itself). Not a trail row: it opens nothing.
  addListener(ctx, SIGN_OUT_LISTENER, { [SIGN_IN]: true }, async (client) => {
    const signedOut = signedIn.delete(client);
    if (signedOut) client.refresh();
    return { ok: true, value: { signed_out: signedOut } };
  });
  // A reloaded plugin (a new token) starts with nobody signed in: open pages lose what they show.
  ctx.on("dispose", () => {
    for (const client of Object.values(ctx.console.clients) as Client[]) {
      if (!signedIn.has(client) || client.socket.readyState !== 1) continue;
      client.send({ type: "data", body: { key: FEED_KEY, value: null } });
    }
  });
}

/** Closes every console connection and waits (bounded) until the console let them go: an app stopped with a
 * page connected refreshes that page after its service is gone (an uncaught TypeError). */
export async function closeConsolePages(app: Context, timeoutMs = 2_000): Promise<void> {
  const console = app.get("console") as { clients: Record<string, Client> } | undefined;
  if (!console) return;
  for (const client of Object.values(console.clients)) {
    const socket = client.socket as { terminate?: () => void; close: () => void };
    if (socket.terminate) socket.terminate();
    else socket.close();
  }
  const deadline = Date.now() + timeoutMs;
  while (Object.keys(console.clients).length > 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
}

/** The built page (`console/dist`) and its source for dev mode. The console serves a plugin's files only from
 * under `node_modules`, so a clone's page is reached through a link in its own `node_modules`. */
function pageFiles(logger: Logger, say: Say): { dev: string; prod: string } | undefined {
  const root = packageRoot(import.meta.dirname)?.dir;
  if (!root) return undefined;
  const dev = join(root, "console", "client", "index.ts");
  const built = join(root, "console", "dist");
  if (!existsSync(join(built, "index.js"))) {
    logger.warn(say("anon-notify.console-log.not-built", { path: join(built, "index.js") }));
    return { dev, prod: built };
  }
  if (built.split(sep).includes("node_modules")) return { dev, prod: built };
  // Named by the build's path: clones sharing one node_modules (git worktrees) each serve their own page.
  const link = join(root, "node_modules", `.anon-notify-console-${createHash("sha256").update(built).digest("hex").slice(0, 12)}`);
  try {
    if (!existsSync(link) || readlinkSync(link) !== built) {
      rmSync(link, { force: true });
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(built, link, "dir");
    }
    return { dev, prod: link };
  } catch (error) {
    logger.warn(say("anon-notify.console-log.not-linked", { error: errorText(error) }));
    return { dev, prod: built };
  }
}
