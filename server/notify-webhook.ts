/** The notify-webhook Koishi plugin: declares the configuration and composes the parts, one folder under server/ each (docs/architecture.md). */
import type { Context } from "koishi";
import type {} from "@koishijs/plugin-server";
import { localeLanguage } from "../common/locale.ts";
import { ApprovalMessenger } from "./approvals/messenger.ts";
import { ApprovalRoutes } from "./approvals/routes.ts";
import { ApprovalService } from "./approvals/service.ts";
import { ApprovalStore } from "./approvals/store.ts";
import { GrantService } from "./approvals/grants.ts";
import { GrantStore } from "./approvals/grant-store.ts";
import { auditOperatorRequests } from "./http/operator-requests.ts";
import { AuditRoutes } from "./audit/routes.ts";
import { AuditLog } from "./audit/store.ts";
import { ChatCommands } from "./chat/plugin.ts";
import { ConsolePage } from "./console/index.ts";
import { consoleTokenProblem } from "./console/sign-in.ts";
import { CommandRoutes } from "./queue/routes.ts";
import { CommandStore } from "./queue/store.ts";
import { ownerSender } from "./handover/send-to-owner.ts";
import { EventWorker } from "./handover/worker.ts";
import { DiskSync } from "./disk-sync.ts";
import { EventIntake, eventCeiling } from "./events/intake.ts";
import { EventRoutes } from "./events/routes.ts";
import { EventStore } from "./events/store.ts";
import type { EventRow } from "./events/receipt-rules.ts";
import { HttpApi } from "./http/api.ts";
import { MIN_TOKEN_CHARS } from "./token-file.ts";
import { AUTH_FAILURE_LIMIT } from "./http/auth-failures.ts";
import { koishi, untracedDatabase } from "./koishi.ts";
import { configDescriptions, defineLocales, instanceLocale, instanceSay, instanceText, usageText } from "./locales/load.ts";
import { OperatorRoutes } from "./operator/routes.ts";
import { OperatorService } from "./operator/service.ts";
import { PairingCodes, PairingRoutes } from "./pairing/routes.ts";
import { URGENT_KINDS } from "./mute/decisions.ts";
import { MuteLoader } from "./mute/plugin.ts";
import { MuteStore } from "./mute/store.ts";
import { LogPersona } from "./persona/log.ts";
import { PersonaSlot } from "./persona/port.ts";
import { Retention } from "./retention/plugin.ts";
import { PersonaTools } from "./persona/yesimbot-tools.ts";
import { YesImBotV3 } from "./persona/yesimbot-v3.ts";
import { SessionRegistry } from "./sessions/registry.ts";
import { HostRegistry } from "./hosts/registry.ts";
import { HostRoutes } from "./hosts/routes.ts";
import { StartService } from "./hosts/service.ts";
import { SessionRoutes } from "./sessions/routes.ts";
import { missingServicesText } from "./status/missing-services.ts";
import { NoticeRouteReport } from "./status/notices.ts";
import { StatusRoutes } from "./status/routes.ts";
import { Watchdog } from "./watchdog/plugin.ts";
import { pushConfigProblem } from "./push/config.ts";
import { pushParts } from "./push/parts.ts";
import { PushRoutes } from "./push/routes.ts";
import { DEFAULT_EVENTS, DEFAULT_MARKER, DEFAULT_PROMPT, parseTriggers, type TriggerConfig } from "./triggers/config-rules.ts";
import { TriggerRoutes } from "./triggers/routes.ts";
import { TriggerService } from "./triggers/service.ts";
import { TriggerStore } from "./triggers/store.ts";

const { Schema } = koishi;

export const name = "notify-webhook";
/** Optional here so that the plugin starts without them and says what is missing (a 503 naming
 * it, one log line); the parts that use them require them and start once they are there. */
export const inject = { server: { required: false }, database: { required: false } };

/** The services every route needs; the locale files say what to do about each one's absence (`anon-notify.services.*`). */
const NEEDED_SERVICES = ["server", "database"] as const;

/** The help on Koishi's config page: in the environment's language until the plugin runs, then the instance's; a live binding the page reads. */
export let usage = usageText(localeLanguage(process.env));

/** A Config section described in the locale files (`_config.<name>`), in both languages. */
function section<X extends Parameters<typeof Schema.object>[0]>(name: string, shape: X) {
  return Schema.object(shape).i18n(configDescriptions(name));
}

export const Config = Schema.intersect([
  section("auth", {
    token: Schema.string().role("secret").required(),
    operatorToken: Schema.string().role("secret").default(""),
    pairingCode: Schema.string().role("secret").default("").hidden(),
  }),
  section("target", { botId: Schema.string().default(""), recipientId: Schema.string().default("") }),
  section("limits", {
    eventsPerMinute: Schema.natural().min(1).default(60),
    eventBurst: Schema.natural().min(1).default(20),
    heartbeatsPerMinute: Schema.natural().min(1).default(60),
    heartbeatBurst: Schema.natural().min(1).default(20),
    heartbeatsTotalPerMinute: Schema.natural().min(1).default(6000),
    heartbeatTotalBurst: Schema.natural().min(1).default(1000),
    longPollsPerSession: Schema.natural().min(1).default(4),
    longPollsTotal: Schema.natural().min(1).default(256),
    requestBodyTimeoutMs: Schema.natural().role("ms").min(100).default(30_000),
  }),
  section("persona", {
    injectMaxAttempts: Schema.natural().min(1).default(20),
    injectRetryDelayMs: Schema.natural().role("ms").default(15_000),
    personaWaitMs: Schema.natural().role("ms").default(10_000),
    stimulusPriority: Schema.natural().default(5),
    logPersona: Schema.boolean().default(false),
  }),
  section("sessions", { sessionHeartbeatTimeoutMs: Schema.natural().role("ms").min(1000).default(30_000) }),
  section("commands", {
    commandLeaseMs: Schema.natural().role("ms").min(100).default(60_000),
    commandImageBudgetBytes: Schema.natural().default(32 * 1024 * 1024),
    stopTtlMs: Schema.natural().role("ms").min(1000).default(30_000),
  }),
  section("watchdog", {
    watchdogEnabled: Schema.boolean().default(true),
    watchdogStallAfterMs: Schema.natural().role("ms").min(1000).default(600_000),
    watchdogCheckIntervalMs: Schema.natural().role("ms").min(100).default(15_000),
    watchdogDelivery: Schema.union(["anon", "direct"]).default("anon"),
  }),
  section("retention", { auditRetentionDays: Schema.natural().min(1).default(30), retentionDays: Schema.natural().min(1).default(30) }),
  section("chat", { chatRefusal: Schema.union(["reply", "silent"]).default("reply") }),
  section("mute", {
    muteBreakThrough: Schema.array(Schema.union([...URGENT_KINDS]))
      .role("checkbox")
      .default([...URGENT_KINDS]),
  }),
  section("approvals", {
    approvalMaxMinutes: Schema.natural().min(1).max(1440).default(15),
    approvalsOpenPerSession: Schema.natural().min(1).default(3),
    approvalsPerMinute: Schema.natural().min(1).default(10),
    approvalBurst: Schema.natural().min(1).default(5),
    grantMaxMinutes: Schema.natural().min(1).max(240).default(120),
    approvalOperatorDecisions: Schema.boolean().default(false),
    approvalMessagesPerMinute: Schema.natural().min(1).default(10),
  }),
  section("console", {
    consoleToken: Schema.string().role("secret").default(""),
    consoleActions: Schema.boolean().default(false),
    consoleAuthority: Schema.natural().default(4),
    consoleOrigins: Schema.array(Schema.string().role("link")).default([]),
    consoleAlone: Schema.boolean().default(false).hidden(),
  }),
  section("push", {
    ntfyUrl: Schema.string().role("link").default(""),
    ntfyTopic: Schema.string().default(""),
    ntfyToken: Schema.string().role("secret").default(""),
    ntfyCompletions: Schema.boolean().default(false),
    pushRetryDelayMs: Schema.natural().role("ms").default(5_000),
    publicUrl: Schema.string().role("link").default(""),
    feishuWebhook: Schema.string().role("secret").default(""),
    feishuSecret: Schema.string().role("secret").default(""),
  }),
  section("triggers", {
    triggers: Schema.array(
      section("trigger", {
        name: Schema.string().required(),
        secret: Schema.string().role("secret").required(),
        projects: Schema.array(
          Schema.object({ repository: Schema.string().required(), project: Schema.string().required(), host: Schema.string().default("") }),
        )
          .role("table")
          .default([]),
        events: Schema.array(Schema.string()).default([...DEFAULT_EVENTS]),
        labels: Schema.array(Schema.string()).default([]),
        actors: Schema.array(Schema.string()).default([]),
        bots: Schema.array(Schema.string()).default([]),
        marker: Schema.string().default(DEFAULT_MARKER),
        runsPerDay: Schema.natural().min(1).default(20),
        runsPerKeyPerHour: Schema.natural().min(1).default(10),
        turns: Schema.natural().min(1).default(30),
        minutes: Schema.natural().min(1).default(30),
        prompt: Schema.string().role("textarea").default(DEFAULT_PROMPT),
      }),
    ).default([]),
    triggerDelivery: Schema.union(["anon", "direct"]).default("direct"),
  }),
]);
export type Config = ReturnType<typeof Config>;

/** Loads the parts once `server` and `database` are there, and until then answers every route with
 * 503 `service_missing` naming what is missing, and says so in the log once per outage. */
export function apply(ctx: Context, config: Config) {
  defineLocales(ctx);
  usage = usageText(instanceLocale(ctx));
  // Equal tokens would open the operator API to every agent: refuse to start rather than run so.
  if (config.operatorToken && config.operatorToken === config.token) throw new Error(instanceText(ctx, "anon-notify.services.same-tokens", {}));
  const consoleTokenRefused = config.consoleToken ? consoleTokenProblem(config.consoleToken, [config.token, config.operatorToken]) : null;
  if (consoleTokenRefused) throw new Error(consoleTokenRefused);
  // The same minimum as the token files: a short token in koishi.yml is as guessable as one in a file.
  for (const key of ["token", "operatorToken"] as const) {
    const { length } = config[key];
    if (length > 0 && length < MIN_TOKEN_CHARS) throw new Error(instanceText(ctx, "anon-notify.weak-token", { key, length, min: MIN_TOKEN_CHARS }));
  }
  const pushProblem = pushConfigProblem(config);
  if (pushProblem) throw new Error(instanceText(ctx, `anon-notify.push.config.${pushProblem.key}`, { value: pushProblem.value }));
  const triggers = parseTriggers(config.triggers);
  if (!triggers.ok) throw new Error(instanceText(ctx, "anon-notify.triggers.config-problem", { problem: triggers.problem }));
  const logger = ctx.logger("notify-webhook");
  const api = new HttpApi({
    agentToken: config.token,
    operatorToken: config.operatorToken,
    bodyTimeoutMs: config.requestBodyTimeoutMs,
    onFailureBurst: (address) => logger.warn(instanceText(ctx, "anon-notify.wrong-tokens", { address, burst: AUTH_FAILURE_LIMIT.burst })),
  });
  // Asked on every request (the 503 guard): ctx.get walks Koishi's service registry, a third of a
  // heartbeat's JavaScript, so the answer is kept until a service changes.
  let missingNow: string[] | undefined;
  const missing = () => (missingNow ??= NEEDED_SERVICES.filter((service) => ctx.get(service) == null));
  let reported = false;
  const report = (names: string[]) => {
    if (reported) return;
    reported = true;
    logger.warn(missingServicesText(ctx, names));
  };
  // Once everything is back, the next outage is reported again.
  ctx.on("internal/service", () => {
    missingNow = undefined;
    if (missing().length === 0) reported = false;
  });
  // Drivers provide `database` from their own start-up work, so look only once start-up has settled.
  ctx.on("ready", () => {
    void ctx.lifecycle.flush().then(() => {
      const names = missing();
      if (names.length > 0 && ctx.scope.isActive) report(names);
    });
  });
  ctx.inject(["server"], (scope) => api.refuseWhileMissing(scope, missing, report));
  // Outlives the parts (a database that comes and goes), so a used code stays used; npm start passes the code it prints.
  const pairing = new PairingCodes();
  if (config.pairingCode) pairing.issue(config.pairingCode);
  ctx.plugin(Parts, { api, config, pairing, triggers: triggers.triggers });
}

/** Builds the stores and services once, then loads each surface as a sub-plugin with only the parts it needs. Everything hangs off `ctx`, so losing a service
 * or disposing the plugin stops every route, timer and worker; the API's tokens and its guard outlive a database that comes and goes. */
const Parts = { name: "notify-webhook-parts", inject: ["server", "database"], apply: applyParts };

type PartsOptions = { api: HttpApi; config: Config; pairing: PairingCodes; triggers: TriggerConfig[] };

function applyParts(ctx: Context, options: PartsOptions) {
  // A press on a push button can only come once the routes are up, after the approvals are built.
  let approvals: ApprovalService | undefined;
  const notices = noticeServices(ctx, options, { decide: (request) => approvals!.decide(request) });
  const services = { ...notices, ...approvalServices(ctx, options.config, notices) };
  approvals = services.approvals;
  httpRoutes(ctx, options, services);
  ownerSurfaces(ctx, options.config, services);
  upkeep(ctx, options, services);
  if (options.triggers.length > 0) triggerRoutes(ctx, options, services);
}

/** The sessions, the commands for them, and the path of a notice from intake to the persona or a push route. */
function noticeServices(ctx: Context, { api, config }: PartsOptions, approvals: Pick<ApprovalService, "decide">) {
  const audit = new AuditLog(ctx);
  api.aroundOperatorRequests(auditOperatorRequests(audit));
  const personas = new PersonaSlot();
  const registry = new SessionRegistry(config.sessionHeartbeatTimeoutMs);
  const hosts = new HostRegistry(config.sessionHeartbeatTimeoutMs);
  const commands = new CommandStore(ctx, {
    leaseMs: config.commandLeaseMs,
    imageBudgetBytes: config.commandImageBudgetBytes,
    stopTtlMs: config.stopTtlMs,
    audit,
  });
  const starts = new StartService(hosts, commands);
  // Where the owner is reached: every part that talks to the owner names the same bot and recipient.
  const owner = { botId: config.botId, recipientId: config.recipientId };
  const events = new EventStore(ctx);
  const mutes = new MuteStore(ctx);
  const approvalStore = new ApprovalStore(ctx);
  const worker = new EventWorker(ctx, events, personas, {
    maxAttempts: config.injectMaxAttempts,
    retryDelayMs: config.injectRetryDelayMs,
    personaWaitMs: config.personaWaitMs,
    ...owner,
    audit,
    mute: { store: mutes, breakThrough: config.muteBreakThrough },
  });
  const limit = { perMinute: config.eventsPerMinute, burst: config.eventBurst };
  const disk = new DiskSync(untracedDatabase(ctx).drivers); // read at every sync: untraced
  ctx.on("dispose", () => disk.close());
  const push = pushParts(
    ctx,
    { ...config, breakThrough: config.muteBreakThrough, maxAttempts: config.injectMaxAttempts },
    { events, approvalStore, audit, mutes, noBot: !(owner.botId && owner.recipientId), approvals },
  );
  // The push route is offered each accepted notice beside the worker (and again at start, deduplicated by its receipt).
  const handOver = push
    ? {
        enqueue: (row: Parameters<EventWorker["enqueue"]>[0]) => {
          worker.enqueue(row);
          push.offer(row.event_id);
        },
        overlay: (row: EventRow) => worker.overlay(row),
      }
    : worker;
  const intake = new EventIntake({ store: events, worker: handOver, limit, totalLimit: eventCeiling(limit), audit, registry, sync: () => disk.flush() });
  const operator = new OperatorService({
    registry,
    commands,
    audit,
    mutes,
    eventSession: async (eventId) => (await events.get(eventId))?.session_id,
    messageNotices: (messageId) => events.byMessageId(messageId),
    eventsWaiting: async () => ({ persona: await events.countPending("anon"), held: worker.heldCount }),
  });
  return { audit, personas, registry, hosts, commands, starts, owner, events, mutes, approvalStore, limit, push, intake, operator };
}

type NoticeServices = ReturnType<typeof noticeServices>;

/** Asking the owner before a gated tool runs: the requests, the standing grants, and the chat messages about them. */
function approvalServices(ctx: Context, config: Config, { audit, owner, personas, registry, commands, approvalStore, push, intake }: NoticeServices) {
  const messenger = new ApprovalMessenger(ctx, {
    store: approvalStore,
    audit,
    send: ownerSender(ctx, owner),
    grantMaxMinutes: config.grantMaxMinutes,
    mention: async (event) => void (await intake.submit(event, { actor: "server" })),
    personaPresent: () => personas.current() !== undefined,
    chatConfigured: Boolean(owner.botId && owner.recipientId),
    pace: { cap: config.approvalMessagesPerMinute, windowMs: 60_000 },
  });
  const grantStore = new GrantStore(ctx);
  const grants = new GrantService({ store: grantStore, audit, maxMinutes: config.grantMaxMinutes });
  const approvals = new ApprovalService({
    store: approvalStore,
    audit,
    control: commands,
    changed: () => {
      messenger.kick();
      push?.approvalsChanged();
    },
    isLive: (sessionId, runtimeId) => registry.isLiveRuntime(sessionId, runtimeId),
    presenceGraceMs: config.sessionHeartbeatTimeoutMs,
    limits: {
      maxOpenMs: config.approvalMaxMinutes * 60_000,
      openPerSession: config.approvalsOpenPerSession,
      rate: { perMinute: config.approvalsPerMinute, burst: config.approvalBurst },
    },
    grants,
    operatorDecisions: { optedIn: config.approvalOperatorDecisions, serverUid: process.getuid?.() },
  });
  return { messenger, grantStore, grants, approvals };
}

type Services = NoticeServices & ReturnType<typeof approvalServices>;

/** The HTTP API: what the agents, the hosts and the operator call. */
function httpRoutes(ctx: Context, { api, config, pairing }: PartsOptions, s: Services) {
  const { owner, personas, registry, hosts, commands, push } = s;
  ctx.plugin(StatusRoutes, { api, ...owner, personas, sessionHeartbeatTimeoutMs: config.sessionHeartbeatTimeoutMs, push: push?.pusher });
  if (push) ctx.plugin(PushRoutes, { api, pusher: push.pusher, answers: push.answers, prune: push.prune });
  ctx.plugin(PairingRoutes, { api, codes: pairing, owner, personas, token: config.token, announced: Boolean(config.pairingCode) });
  ctx.plugin(MuteLoader, { api, mutes: s.mutes });
  ctx.plugin(SessionRoutes, {
    api,
    registry,
    limit: { perMinute: config.heartbeatsPerMinute, burst: config.heartbeatBurst },
    totalLimit: { perMinute: config.heartbeatsTotalPerMinute, burst: config.heartbeatTotalBurst },
  });
  const pollCaps = { perSession: config.longPollsPerSession, total: config.longPollsTotal };
  ctx.plugin(CommandRoutes, { api, registry, hosts, commands, sweepMs: Math.min(config.commandLeaseMs, config.stopTtlMs), pollCaps });
  ctx.plugin(OperatorRoutes, { api, operator: s.operator });
  ctx.plugin(HostRoutes, { api, hosts, starts: s.starts });
  ctx.plugin(EventRoutes, { api, intake: s.intake, push: push?.pusher });
  ctx.plugin(ApprovalRoutes, { api, approvals: s.approvals, grants: s.grants, messenger: s.messenger, registry, pushRoute: push?.route });
  ctx.plugin(AuditRoutes, { api, audit: s.audit, limit: s.limit, totalLimit: eventCeiling(s.limit) });
}

/** Where the owner meets the server: the persona, chat commands and the console page. */
function ownerSurfaces(ctx: Context, config: Config, { owner, personas, registry, operator, starts, approvals, grants, audit, events }: Services) {
  ctx.plugin(NoticeRouteReport, { personas, owner });
  ctx.plugin(PersonaTools, { operator, approvals, owner, audit });
  ctx.plugin(ChatCommands, { operator, starts, approvals, grants, audit, ...owner, refusal: config.chatRefusal });
  ctx.plugin(ConsolePage, {
    registry,
    operator,
    approvals,
    grants,
    audit,
    events,
    starts,
    options: {
      openToAll: config.consoleActions,
      token: config.consoleToken,
      authority: config.consoleAuthority,
      origins: config.consoleOrigins,
      alone: config.consoleAlone,
    },
  });
  ctx.plugin(YesImBotV3, { personas, target: { ...owner, stimulusPriority: config.stimulusPriority } });
  if (config.logPersona) ctx.plugin(LogPersona, personas);
}

/** Work on a timer: pruning old rows, and telling the owner about sessions that stalled. */
function upkeep(ctx: Context, { api, config }: PartsOptions, { audit, events, commands, approvalStore, grantStore, registry, intake }: Services) {
  ctx.plugin(Retention, {
    api,
    audit,
    events,
    commands,
    approvals: approvalStore,
    grants: grantStore,
    auditRetentionDays: config.auditRetentionDays,
    retentionDays: config.retentionDays,
  });
  if (config.watchdogEnabled) {
    const options = { stallAfterMs: config.watchdogStallAfterMs, checkIntervalMs: config.watchdogCheckIntervalMs, delivery: config.watchdogDelivery };
    ctx.plugin(Watchdog, { registry, intake, audit, options });
  }
}

/** Signed webhooks (server/triggers) that start or continue a key's session. */
function triggerRoutes(ctx: Context, { api, config, triggers }: PartsOptions, { starts, commands, registry, hosts, intake, audit }: Services) {
  const logger = ctx.logger("notify-webhook");
  const deps = { triggers, store: new TriggerStore(ctx), starts, commands, registry, hosts, intake, audit, say: instanceSay(ctx) };
  ctx.plugin(TriggerRoutes, { api, triggers: new TriggerService({ ...deps, delivery: config.triggerDelivery, log: (line) => logger.warn(line) }) });
}
