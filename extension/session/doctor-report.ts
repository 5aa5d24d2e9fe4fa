/** What `/anon-notify-doctor` found, as lines in the session's language; never a token's value. */
import type { Receipt } from "../../protocol/events.ts";
import type { HealthAnswer, RecipientAnswer } from "../../protocol/status.ts";
import type { ConfigFileInfo, ConfigOrigin } from "../config/config.ts";
import type { ServerCause } from "../server-client/decisions.ts";
import type { LastDelivery } from "../notices/notifier.ts";
import type { Messages } from "../texts/messages.ts";

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
  /** The footer text, which already says active / inactive / suppressed / misconfigured. */
  footer: string;
  presence: { running: boolean; accepted: boolean; lastFailure: string | null };
  commands: { enabled: boolean; running: boolean; held: string | null; queued: number };
  outbox: Probe<{ count: number; oldest: number | null }>;
  lastDelivery: LastDelivery | undefined;
  /** The last accepted notice's receipt as the server has it now. */
  lastReceipt?: Probe<Pick<Receipt, "state" | "error">>;
  /** Present when the user asked for a test notice. */
  test?: Probe<{ eventId: string; receipt: Pick<Receipt, "state" | "error"> | null; final: boolean }>;
}

function shown(key: string, value: unknown): string {
  if (key === "token") return "***";
  return value === undefined ? "—" : JSON.stringify(value);
}

function originText(m: Messages, origin: ConfigOrigin | undefined): string {
  if (!origin) return m.doctor.layer.default;
  return `${m.doctor.layer[origin.layer]} ${origin.where}`;
}

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
    ...facts.values.map(({ key, value, origin }) => d.valueFrom(key, shown(key, value), originText(m, origin))),
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
