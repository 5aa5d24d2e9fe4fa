/** `/anon-notify-doctor [test]`: answers "is this working?" without changing anything (never showing a token's value); every
 * network call runs here in the command handler, bounded, and `test` sends one real `info` notice. */
import { randomUUID } from "node:crypto";
import { accessSync, constants, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { setTimeout as delay } from "node:timers/promises";
import type { ExtensionAPI, ExtensionCommandContext } from "@earendil-works/pi-coding-agent";
import type { z } from "zod";
import { isMissingFile } from "../../common/errors.ts";
import { Receipt } from "../../protocol/events.ts";
import { HealthAnswer, RecipientAnswer } from "../../protocol/status.ts";
import type { ConfigFileInfo, ConfigOrigin } from "../config/config.ts";
import type { Config } from "../config/schema-rules.ts";
import type { LastDelivery } from "../notices/notifier.ts";
import type { WebhookClient } from "../server-client/http-client.ts";
import { footerText, type Messages } from "../texts/messages.ts";
import { sampleNoticeContext } from "../notices/hand-over.ts";
import { externalNotice } from "../notices/notice-rules.ts";
import type { Presence } from "../presence/presence.ts";
import { sessionStatus } from "../../protocol/state-bus.ts";
import { serverCause, type ServerCause } from "../server-client/decisions.ts";
import { FINAL_RECEIPT_STATES } from "../notices/receipt-watch.ts";
import { asServerError } from "../server-client/retry.ts";
import { show } from "./report.ts";
import { outage, sessionFacts, type SessionState } from "./session.ts";

/** A question to the server: its answer, its failure (with the real cause when there is one), or why it was not asked. */
export type Probe<T> = { kind: "ok"; value: T } | { kind: "error"; message: string; cause?: ServerCause | null } | { kind: "skipped"; why: string };

export interface DoctorFacts {
  configErrors: readonly string[];
  files: readonly ConfigFileInfo[];
  /** Keys in effect with where each came from; undefined origin = the built-in default. */
  values: readonly { key: string; value: unknown; origin: ConfigOrigin | undefined }[];
  token: { used: "env" | "inline" | "file" | "none"; file: string; fileState: "present" | "missing" | "empty" | "unreadable" } | undefined;
  /** Operator token files of a server found on this machine that the user Pi runs as can read. */
  operatorTokens: readonly string[];
  endpoint: string | undefined;
  health: Probe<HealthAnswer>;
  recipient: Probe<RecipientAnswer>;
  footer: string;
  presence: { running: boolean; accepted: boolean; lastFailure: string | null };
  commands: { enabled: boolean; running: boolean; held: string | null; queued: number };
  outbox: Probe<{ count: number; oldest: number | null }>;
  lastDelivery: LastDelivery | undefined;
  /** The last accepted notice's receipt as the server has it now. */
  lastReceipt?: Probe<Pick<Receipt, "state" | "error">>;
  test?: Probe<{ eventId: string; receipt: Pick<Receipt, "state" | "error"> | null; final: boolean }>;
}

const shown = (key: string, value: unknown) => (key === "token" ? "***" : value === undefined ? "—" : JSON.stringify(value));

function probeLine<T>(m: Messages, probe: Probe<T>, ok: (value: T) => string[], error: (message: string) => string, endpoint = "—"): string[] {
  if (probe.kind === "ok") return ok(probe.value);
  if (probe.kind === "error") return [probe.cause ? m.link.cause[probe.cause](endpoint, probe.message) : error(probe.message)];
  return [m.doctor.notChecked(probe.why)];
}

export function doctorReport(m: Messages, facts: DoctorFacts): string {
  const d = m.doctor;
  const section = (title: string, lines: string[]) => [title, ...lines.map((line) => `  ${line}`)];
  const config = [
    // The old location inside the extension's folder only matters when something is there.
    ...facts.files
      .filter((file) => !(file.layer === "legacy" && file.status === "missing"))
      .map((file) => `${d.layer[file.layer]} ${file.path}: ${d.fileStatus[file.status]}`),
    ...(facts.configErrors.length > 0 ? [d.configInvalid, ...facts.configErrors.map((error) => `  ${error}`)] : []),
    ...facts.values.map(({ key, value, origin }) => d.valueFrom(key, shown(key, value), origin ? `${d.layer[origin.layer]} ${origin.where}` : d.layer.default)),
  ];
  const token = facts.token
    ? [d.tokenUsed(d.tokenFrom[facts.token.used]), d.tokenFile(facts.token.file, d.tokenFileState[facts.token.fileState])]
    : [d.notChecked(d.configInvalid)];
  token.push(...facts.operatorTokens.map((path) => d.operatorTokenReadable(path)));
  const endpoint = facts.endpoint ?? "—";
  const server = probeLine(
    m,
    facts.health,
    (health) => [
      d.reachable(endpoint, health.version, health.protocol.events, health.protocol.commands),
      d.capabilities(health.capabilities.join(", ") || d.none),
      // Said by servers since 2026-12; an older one says nothing about where notices go.
      ...(health.notices
        ? [d.noticeRoute(d.routes[health.notices.route], health.notices.ready ? null : m.link.reason(health.notices.reason ?? "no_persona"))]
        : []),
      ...(health.chat === undefined ? [] : [d.chat(health.chat)]),
      ...(health.push === undefined ? [] : [d.push(health.push, m.link.reason)]),
    ],
    (message) => d.unreachable(endpoint, message),
    endpoint,
  );
  const recipient = probeLine(
    m,
    facts.recipient,
    (answer) => [d.recipientAnswer(answer.qq ?? "—", answer.anon_qq ?? "—", answer.status, answer.reason && m.link.reason(answer.reason))],
    d.recipientError,
    endpoint,
  );
  const session = [
    d.sessionLine(facts.footer),
    d.presenceLine(facts.presence.running, facts.presence.accepted),
    ...(facts.presence.lastFailure ? [`  ${d.lastFailure(facts.presence.lastFailure)}`] : []),
    d.commandsLine(facts.commands.running, facts.commands.enabled, facts.commands.held, facts.commands.queued),
  ];
  const time = m.format.dateTime;
  const last = facts.lastDelivery;
  const now = facts.lastReceipt?.kind === "ok" ? facts.lastReceipt.value : null;
  // The log persona takes a notice as a persona would, but only prints it: its receipt says so.
  const printedOnly = facts.health.kind === "ok" && facts.health.value.notices?.route === "log";
  const state = (value: Receipt["state"]) => (printedOnly && value === "context_injected" ? d.printedOnly(value) : value);
  const accepted = (value: Receipt["state"]) => (now ? d.receiptNow(state(now.state), now.error && m.link.reason(now.error)) : d.accepted(state(value)));
  const delivery = [
    ...probeLine(m, facts.outbox, ({ count, oldest }) => [d.outbox(count, oldest === null ? null : time(oldest))], d.outboxError),
    last ? d.lastDelivery(last.eventId, last.status, time(last.at), last.ok ? accepted(last.state) : d.failed(last.attempts, last.error)) : d.lastDeliveryNone,
  ];
  const test = facts.test
    ? probeLine(
        m,
        facts.test,
        ({ eventId, receipt, final }) => [
          d.testSent(eventId),
          ...(receipt ? [d.testReceipt(state(receipt.state), receipt.error && m.link.reason(receipt.error), final)] : []),
        ],
        d.testFailed,
      )
    : [d.testHint];
  return [
    d.title,
    ...section(d.section.config, config),
    ...section(d.section.token, token),
    ...section(d.section.server, server),
    ...section(d.section.recipient, recipient),
    ...section(d.section.session, session),
    ...section(d.section.delivery, delivery),
    ...section(d.section.test, test),
  ].join("\n");
}

const DOCTOR_REQUEST_TIMEOUT_MS = 5_000;
/** How long `test` follows the receipt before it reports the state it has. */
const DOCTOR_RECEIPT_WAIT_MS = 15_000;
const RECEIPT_POLL_MS = 250;

/** Always shown, with where they came from, besides every key a file or variable set. */
const KEY_VALUES = ["enabled", "endpoint", "tokenFile", "recipient.qq", "recipient.anonQq", "language", "projectConfig"];

interface DoctorDeps {
  session(): SessionState | undefined;
  text(): Messages;
  presence: Pick<Presence, "status">;
  commands: { pending(): { held: string | null; queued: string[] } };
  runtimeId: string;
}

function valueAt(config: Config, key: string): unknown {
  return key.split(".").reduce<unknown>((at, part) => (typeof at === "object" && at !== null ? (at as Record<string, unknown>)[part] : undefined), config);
}

function tokenFacts(config: Config): NonNullable<DoctorFacts["token"]> {
  let fileState: NonNullable<DoctorFacts["token"]>["fileState"];
  try {
    fileState = readFileSync(config.tokenFile, "utf8").trim() ? "present" : "empty";
  } catch (error) {
    fileState = isMissingFile(error) ? "missing" : "unreadable";
  }
  const used = process.env.ANON_NOTIFY_TOKEN?.trim() ? "env" : config.token ? "inline" : fileState === "present" ? "file" : "none";
  return { used, file: config.tokenFile, fileState };
}

/** Where a server on this machine keeps its operator token: the standalone's `data/operator.token`
 * beside the project or this package, or `ANON_NOTIFY_OPERATOR_TOKEN_FILE`; those Pi's user can read. */
export function readableOperatorTokens(cwd: string, env: NodeJS.ProcessEnv): string[] {
  const here = resolve(import.meta.dirname, "..", "..");
  const candidates = [join(cwd, "data", "operator.token"), join(here, "data", "operator.token"), env.ANON_NOTIFY_OPERATOR_TOKEN_FILE];
  return [...new Set(candidates.filter((path): path is string => !!path).map((path) => resolve(path)))].filter((path) => {
    try {
      accessSync(path, constants.R_OK);
      return true;
    } catch {
      return false;
    }
  });
}

/** One question; a failure keeps its real cause (no token here, a refused token, no answer, not our server). */
async function ask<T>(why: (error: unknown) => string, run: () => Promise<T>, hasToken = true): Promise<Probe<T>> {
  try {
    return { kind: "ok", value: await run() };
  } catch (error) {
    return { kind: "error", message: why(error), cause: serverCause(asServerError(error), hasToken) };
  }
}

/** Sends one `info` notice and follows its receipt until it is final or the wait is over. */
async function testNotice(s: SessionState & { config: Config }, client: WebhookClient, runtimeId: string): Promise<NonNullable<DoctorFacts["test"]>> {
  const event = externalNotice(
    { status: "info", summary: s.text.doctor.testSummary, eventId: `doctor-${randomUUID()}`, details: { doctor_test: true } },
    randomUUID(),
    sampleNoticeContext(s.ctx, s.sessionId, runtimeId, s.config, s.text)(),
  );
  try {
    await client.postEvent(event);
  } catch (error) {
    // A receipt of `failed` is an answer too: it is read below with its reason.
    if ((error as { code?: string }).code !== "receipt_failed") return { kind: "error", message: s.text.delivery.why(error) };
  }
  const path = `events/${encodeURIComponent(event.event_id)}`;
  const deadline = Date.now() + DOCTOR_RECEIPT_WAIT_MS;
  let receipt: Receipt | null = null;
  for (;;) {
    try {
      receipt = await client.request("GET", path, { schema: Receipt, timeoutMs: DOCTOR_REQUEST_TIMEOUT_MS });
    } catch (error) {
      if (receipt === null) return { kind: "error", message: s.text.delivery.why(error) };
    }
    const final = receipt !== null && FINAL_RECEIPT_STATES.includes(receipt.state);
    if (final || Date.now() >= deadline) return { kind: "ok", value: { eventId: event.event_id, receipt, final } };
    await delay(RECEIPT_POLL_MS);
  }
}

async function gatherDoctorFacts(s: SessionState, deps: DoctorDeps, withTest: boolean): Promise<DoctorFacts> {
  const m = s.text;
  const config = s.config;
  const client = s.delivery?.client;
  const noServer: Probe<never> = { kind: "skipped", why: !config ? m.doctor.configInvalid : m.doctor.noClient };
  const last = s.delivery?.notifier.lastDelivery();
  const get = <T>(c: WebhookClient, path: string, schema: z.ZodType<T>) =>
    ask(m.delivery.why, () => c.request("GET", path, { schema, timeoutMs: DOCTOR_REQUEST_TIMEOUT_MS }), s.tokenConfigured);
  const [health, recipient, lastReceipt] = client
    ? await Promise.all([
        get(client, "health", HealthAnswer),
        get(client, "recipient", RecipientAnswer),
        // What became of the last notice since the server took it: its receipt now, not the one it answered then.
        last?.ok ? get(client, `events/${encodeURIComponent(last.eventId)}`, Receipt) : noServer,
      ])
    : [noServer, noServer, noServer];
  const outbox = s.delivery?.outbox;
  const pending = deps.commands.pending();
  const values = config
    ? [...new Set([...KEY_VALUES, ...Object.keys(s.configOrigins)])].map((key) => ({
        key,
        value: key === "language" ? s.language : valueAt(config, key),
        origin: s.configOrigins[key] ?? (key === "language" ? localeOrigin() : undefined),
      }))
    : [];
  return {
    configErrors: s.configErrors,
    files: s.configFiles,
    values,
    token: config ? tokenFacts(config) : undefined,
    operatorTokens: readableOperatorTokens(s.ctx.cwd, process.env),
    endpoint: config?.endpoint,
    health,
    recipient,
    footer: footerText(m, sessionStatus(sessionFacts(s)), s.active, config ? { qq: config.recipient.qq, note: s.recipientNote } : null, outage(s)),
    presence: deps.presence.status(),
    commands: {
      enabled: config?.command.enabled ?? false,
      running: s.servicesRunning && (config?.command.enabled ?? false),
      held: pending.held,
      queued: pending.queued.length,
    },
    outbox: outbox
      ? await ask(m.delivery.why, async () => {
          const entries = await outbox.list();
          return { count: entries.length, oldest: entries[0]?.queuedAt ?? null };
        })
      : noServer,
    lastDelivery: last,
    ...(last?.ok ? { lastReceipt } : {}),
    ...(withTest
      ? {
          test:
            client && config && s.tokenConfigured
              ? await testNotice({ ...s, config }, client, deps.runtimeId)
              : { kind: "skipped" as const, why: !config ? m.doctor.configInvalid : !client ? m.doctor.noClient : m.doctor.tokenFrom.none },
        }
      : {}),
  };
}

/** Where the language came from when no config layer set it: the locale variable that decided. */
function localeOrigin() {
  const name = ["LC_ALL", "LC_MESSAGES", "LANG"].find((variable) => process.env[variable]?.trim());
  return { layer: "env" as const, where: name ? `${name}=${process.env[name]}` : "LANG" };
}

export function registerDoctorCommand(pi: ExtensionAPI, deps: DoctorDeps): void {
  pi.registerCommand("anon-notify-doctor", {
    description: deps.text().doctor.description,
    handler: async (args: string, ctx: ExtensionCommandContext) => {
      const arg = args.trim();
      if (arg !== "" && arg !== "test") return show(ctx, deps.text().doctor.usage);
      const s = deps.session();
      if (!s) return show(ctx, deps.text().toggle.notReady);
      show(ctx, doctorReport(s.text, await gatherDoctorFacts(s, deps, arg === "test")));
    },
  });
}
