/** One bound Pi session: configuration, subagent flag, activation and delivery, opened at session_start; the footer, state bus and services follow it. */
import { createHash } from "node:crypto";
import { join } from "node:path";
import { debuglog } from "node:util";
import type { ExtensionAPI, ExtensionContext, SessionStartEvent } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { ACTIVATION_VERSION, APPROVALS_FLAG, START_ON_FLAG, SUBAGENT_FLAG, isSubagent, readActivation } from "../../activation.ts";
import { agentDirFrom, dataDirFor, loadConfig, readToken, type ConfigOrigin } from "../config/config.ts";
import { type Config, withForcedApprovals } from "../config/schema-rules.ts";
import { createWebhookClient } from "../server-client/http-client.ts";
import { serverCause } from "../server-client/decisions.ts";
import { Link } from "../server-client/link.ts";
import { asServerError } from "../server-client/retry.ts";
import { ReceiptWatch } from "../notices/receipt-watch.ts";
import { Notifier } from "../notices/notifier.ts";
import { Outbox } from "../notices/outbox.ts";
import { footerText, messagesFor, type Messages, type RecipientNote } from "../texts/messages.ts";
import { STATE_CHANNEL, STATUS_KEY, servicesEnabled, sessionStatus, type SessionFacts, type StatePayload } from "../../protocol/state-bus.ts";
import { inheritActivation, writeActivation } from "../activation/store.ts";
import type { Report } from "./report.ts";

/** Reload and quit wait this long for notices in flight; unsent finals stay in the outbox. */
export const SHUTDOWN_FLUSH_MS = 3_000;

/** Runs only while the session is active (heartbeats, the command channel, the progress tool), started after activation is persisted. */
export type SessionService = { start(ctx: ExtensionContext): void; stop(): Promise<void> };

export type Delivery = NonNullable<ReturnType<typeof openDelivery>>;

export type SessionState = ReturnType<typeof openSession>;

const debug = debuglog("anon-notify");

export const sessionFacts = (s: SessionState): SessionFacts => ({ sessionActive: s.active, subagent: s.subagent, config: s.configState });

/** Whether this session's notices go out now: active, a main agent, configured, with delivery. */
export const notifying = (s: SessionState | undefined): s is SessionState & { config: Config; delivery: Delivery } =>
  !!s && servicesEnabled(sessionFacts(s)) && !!s.config && !!s.delivery;

/** The config layers and the token as read now; `inputs` is both as one string, so a change to either shows as a difference. */
function readInputs(ctx: ExtensionContext) {
  const loaded = loadConfig({ cwd: ctx.cwd, env: process.env, projectTrusted: ctx.isProjectTrusted() });
  let token: string | undefined;
  let tokenError: string | undefined;
  try {
    token = loaded.ok ? readToken(loaded.config, process.env, messagesFor(loaded.language)) : undefined;
  } catch (error) {
    tokenError = errorText(error);
  }
  const read = token ?? (tokenError === undefined ? undefined : `unreadable: ${tokenError}`);
  const digest = read === undefined ? null : createHash("sha256").update(read).digest("hex");
  return { loaded, token, tokenError, inputs: JSON.stringify([loaded.language, loaded.ok ? loaded.config : loaded.errors, digest]) };
}

/** Whether the config or the token changed since the session opened (pairing wrote them): `/anon-notify` then reopens the session. */
export function inputsChanged(s: SessionState): boolean {
  return readInputs(s.ctx).inputs !== s.inputs;
}

/** Reads everything a session_start decides: configuration, token, subagent verdict, activation. */
export function openSession(pi: ExtensionAPI, event: SessionStartEvent, ctx: ExtensionContext, report: Report) {
  const { loaded, token, tokenError, inputs } = readInputs(ctx);
  const config = withForcedApprovals(loaded.ok ? loaded.config : undefined, pi.getFlag(APPROVALS_FLAG));
  const text = messagesFor(loaded.language);
  let configState: SessionFacts["config"] = !loaded.ok ? "invalid" : loaded.config.enabled ? "valid" : "disabled";
  const configErrors = loaded.ok ? [] : loaded.errors;
  if (loaded.ok) {
    for (const warning of loaded.warnings) report(warning);
    if (tokenError !== undefined) {
      configErrors.push(tokenError);
      report(tokenError, "error");
      configState = "invalid";
    }
  } else {
    report(text.session.configInvalid(loaded.errors), "error");
  }
  const subagent = isSubagent(
    { mode: ctx.mode, sessionFile: ctx.sessionManager.getSessionFile(), optOutFlag: pi.getFlag(SUBAGENT_FLAG) === true, env: process.env },
    config?.mainAgentOnly ?? true,
  );
  // Restored from all entries on every start: the reason cannot tell new from resumed.
  const reading = readActivation(ctx.sessionManager.getEntries());
  if (reading.record === "invalid") report(text.session.recordInvalid(reading.problem));
  const active =
    event.reason === "fork"
      ? inheritActivation(pi, event, ctx, reading, (why) => report(text.session.inheritFailed(why), "error"))
      : startsOn(pi, reading, subagent, report, text) || reading.active;
  const s = {
    ctx,
    sessionId: ctx.sessionManager.getSessionId(),
    language: loaded.language,
    text,
    config,
    configState,
    /** Why the config is invalid (file or variable, and key), for `/anon-notify` and the doctor. */
    configErrors,
    /** The layers read, and which one set each key: what the doctor shows. */
    configFiles: loaded.files,
    configOrigins: loaded.ok ? loaded.origins : ({} as Record<string, ConfigOrigin>),
    tokenConfigured: token !== undefined,
    subagent,
    active,
    /** What the server said about the recipient when this runtime enabled the session. */
    recipientNote: null as RecipientNote | null,
    delivery: undefined as Delivery | undefined,
    servicesRunning: false,
    /** The last `anon-notify:state` payload sent, so a footer-only change (the link, the held count) is not re-announced. */
    lastPublished: undefined as string | undefined,
    /** What the config layers and the token read as when the session opened (`inputsChanged`). */
    inputs,
  };
  if (config && configState === "valid" && !subagent) s.delivery = openDelivery(config, token, text, report, () => countHeld(pi, s));
  return s;
}

/** `--anon-notify-on` (a session anon-notify-host started): writes the `/anon-notify` record once, when the session has none. */
function startsOn(pi: ExtensionAPI, reading: ReturnType<typeof readActivation>, subagent: boolean, report: Report, text: Messages): boolean {
  if (pi.getFlag(START_ON_FLAG) !== true || reading.record !== "none" || subagent) return false;
  const failure = writeActivation(pi, { version: ACTIVATION_VERSION, active: true, via: "command" }, false);
  if (failure) report(text.session.startOnFailed(failure), "error");
  return failure === undefined;
}

/** Counts what the outbox holds and shows it, from a timer or a request's end: the session may have been replaced meanwhile, its ctx gone stale. */
function countHeld(pi: ExtensionAPI, s: SessionState): void {
  const delivery = s.delivery;
  if (!delivery) return;
  void delivery.outbox
    .list()
    .then((entries) => void (delivery.held = entries.length))
    .catch(() => undefined)
    .then(() => publish(pi, s))
    .catch((error: unknown) => debug(`footer not updated: ${errorText(error)}`));
}

function openDelivery(config: Config, token: string | undefined, text: Messages, report: Report, changed: () => void) {
  try {
    const outbox = new Outbox(join(dataDirFor(agentDirFrom(process.env)), "outbox"), {
      movedAside: (file, why) => report(text.delivery.outboxCorrupt(file, why)),
    });
    const link = new Link((back) => {
      if (back !== undefined) report(text.link.back(text.format.duration(back)), "info");
      changed();
    });
    const client = createWebhookClient({
      endpoint: config.endpoint,
      token,
      timeoutMs: config.delivery.timeoutMs,
      // Without a token the 401 is no refusal of a token: say that there is none here.
      onTokenRejected: () => report(token ? text.session.tokenRejected(config.tokenFile) : text.link.noToken(config.tokenFile), "error"),
      link,
    });
    // The first notice the server took but cannot deliver is said once: every later one fails the same way.
    const receipts = new ReceiptWatch(client, (eventId, error) => report(text.link.firstFailedReceipt(eventId, text.link.reason(error ?? "failed"))), {
      debug,
    });
    const notifier = new Notifier({
      client,
      outbox,
      delivery: config.delivery,
      text: text.delivery,
      log: { info: (m) => report(m, "info"), warn: (m) => report(m), debug },
      heldChanged: changed,
      accepted: (eventId, state) => receipts.accepted(eventId, state),
    });
    // `held`: finals the outbox holds undelivered, as last counted (the footer's "notices held").
    return { client, notifier, outbox, link, held: 0, receipts };
  } catch (error) {
    report(text.session.deliveryFailed(text.delivery.why(error)), "error");
    return undefined;
  }
}

/** A failed request as the person should read it: its real cause when there is one (no token here, not our server, …), else its message. */
export function explainFailure(s: SessionState, error: unknown): string {
  const cause = serverCause(asServerError(error), s.tokenConfigured);
  const why = s.text.delivery.why(error);
  return cause && s.config ? s.text.link.cause[cause](s.config.endpoint, why) : why;
}

/** The footer's outage part: only while the session notifies and the server stopped answering. */
export function outage(s: SessionState): { since: number; held: number } | null {
  const link = s.delivery?.link.state;
  return link?.phase === "down" && s.servicesRunning ? { since: link.since, held: s.delivery!.held } : null;
}

/** The status bar and the `anon-notify:state` payload, from the session's current facts. */
export function publish(pi: ExtensionAPI, s: SessionState): void {
  const facts = sessionFacts(s);
  const status = sessionStatus(facts);
  if (s.ctx.hasUI) {
    s.ctx.ui.setStatus(STATUS_KEY, footerText(s.text, status, s.active, s.config ? { qq: s.config.recipient.qq, note: s.recipientNote } : null, outage(s)));
  }
  const payload: StatePayload = {
    version: 1,
    sessionId: s.sessionId,
    status,
    sessionActive: s.active,
    servicesEnabled: servicesEnabled(facts),
    tokenConfigured: s.tokenConfigured,
  };
  const serialized = JSON.stringify(payload);
  if (serialized === s.lastPublished) return;
  s.lastPublished = serialized;
  pi.events.emit(STATE_CHANNEL, payload);
}

export async function syncServices(s: SessionState, services: readonly SessionService[]): Promise<void> {
  const wanted = servicesEnabled(sessionFacts(s));
  if (wanted === s.servicesRunning) return;
  s.servicesRunning = wanted;
  if (wanted) for (const service of services) service.start(s.ctx);
  else await Promise.all(services.map((service) => service.stop()));
}

/** Shutdown is never a notice and writes no inactive record; stopping the services and flushing run side by side, bounded by SHUTDOWN_FLUSH_MS. */
export async function closeSession(s: SessionState, services: readonly SessionService[]): Promise<void> {
  s.active = false;
  const flushed = s.delivery?.notifier.flush(SHUTDOWN_FLUSH_MS);
  await syncServices(s, services);
  if (!s.delivery) return;
  if (!(await flushed)) debug(`notices still in flight after ${SHUTDOWN_FLUSH_MS} ms at shutdown; finals stay in the outbox`);
  s.delivery.receipts.close();
  await s.delivery.notifier.close();
  await s.delivery.client.close();
  await s.delivery.outbox.close();
}
