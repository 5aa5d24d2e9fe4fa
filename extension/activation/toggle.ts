/** `/anon-notify` switches the session's notices on or off, or refuses with its reason; the record is written before memory changes. */
import { join } from "node:path";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { ACTIVATION_VERSION, enableVerdict, type RecipientCheck } from "../../activation.ts";
import { HealthAnswer, RecipientAnswer } from "../../protocol/status.ts";
import { agentDirFrom, dataDirFor, recipientProblem } from "../config/config.ts";
import type { WebhookClient } from "../server-client/http-client.ts";
import { asServerError, tokenRejected } from "../server-client/retry.ts";
import type { Messages, RecipientNote } from "../texts/messages.ts";
import { writeActivation } from "./store.ts";
import type { Report } from "../session/report.ts";
import { explainFailure, type SessionState } from "../session/session.ts";

/** `/anon-notify` waits this long for the server's recipient status before enabling unverified. */
export const RECIPIENT_CHECK_TIMEOUT_MS = 5_000;

export interface ToggleDeps {
  /** The bound session, read again after each await: it may be replaced meanwhile. */
  session(): SessionState | undefined;
  changed(s: SessionState): Promise<void>;
  text(): Messages;
  report: Report;
  /** Opens the session again when its config or token changed since it opened (pairing, a deleted token file). */
  refresh(): Promise<void>;
}

/** The server's recipient status; `token_rejected` apart, since the server did answer, with a refusal. */
async function checkRecipient(s: SessionState, client: WebhookClient): Promise<RecipientCheck | { kind: "token_rejected" }> {
  try {
    const answer = await client.request("GET", "recipient", { schema: RecipientAnswer, timeoutMs: RECIPIENT_CHECK_TIMEOUT_MS });
    return { kind: "answer", status: answer.status, reason: answer.reason };
  } catch (error) {
    return tokenRejected(asServerError(error)) ? { kind: "token_rejected" } : { kind: "network_error", message: explainFailure(s, error) };
  }
}

/** What the server says of its notices and chat; null when it did not say (an older server, or no answer: the recipient check says why). */
function checkHealth(client: WebhookClient): Promise<Pick<HealthAnswer, "notices" | "chat"> | null> {
  return client.request("GET", "health", { schema: HealthAnswer, timeoutMs: RECIPIENT_CHECK_TIMEOUT_MS }).catch(() => null);
}

/** A session that starts switched on (a /reload, a resume) asks the server once, in the background, whether it has a chat: the footer says so again. */
export function recallNoChat(s: SessionState, changed: () => void): void {
  if (!s.active || !s.delivery) return;
  void checkHealth(s.delivery.client).then((health) => {
    if (health?.chat !== false || s.recipientNote !== null) return;
    s.recipientNote = "no_chat";
    changed();
  });
}

/** What to tell before switching on about where the server's notices go; null when they reach a person. */
export function routeWarning(m: Messages, health: Pick<HealthAnswer, "notices"> | null): string | null {
  const notices = health?.notices;
  if (!notices) return null;
  const reason = m.link.reason(notices.reason ?? "no_persona");
  if (notices.route === "none") return m.toggle.route.none(reason);
  if (notices.route === "log") return m.toggle.route.log;
  if (notices.route === "direct") return notices.ready ? m.toggle.route.directOnly(reason) : m.toggle.route.directNotReady(reason);
  return null;
}

/** Why this session cannot be switched on, or the note and warning to enable it with. */
async function enablePreflight(s: SessionState): Promise<{ refuse: string } | { note: RecipientNote; warning: string | null }> {
  const m = s.text;
  if (s.configState === "disabled") return { refuse: m.toggle.disabled };
  if (!s.config) return { refuse: m.toggle.invalidConfig(s.active, s.configErrors) };
  const problem = recipientProblem(s.config, m);
  if (problem) return { refuse: m.toggle.recipient(problem, join(dataDirFor(agentDirFrom(process.env)), "config.json")) };
  // Without a token every request would only be refused; say which file to create instead.
  if (!s.tokenConfigured) return { refuse: m.toggle.noToken(s.config.tokenFile) };
  if (!s.delivery) return { refuse: m.toggle.noDelivery };
  const [check, health] = await Promise.all([checkRecipient(s, s.delivery.client), checkHealth(s.delivery.client)]);
  // The client has just said that the token was refused, and how to fix it.
  if (check.kind === "token_rejected") return { refuse: m.toggle.tokenRejected };
  const verdict = enableVerdict(check);
  if (!verdict.allow) return { refuse: m.toggle.refusedRecipient(verdict.status, s.config.recipient.qq, s.config.recipient.anonQq) };
  const route = routeWarning(m, health);
  const warnings = (...lines: (string | null)[]) => lines.filter((line) => line !== null).join("\n") || null;
  if (verdict.note === "reachable") return { note: verdict.note, warning: warnings(route) };
  // No chat at all (the plain standalone server): there is no private chat to check or to warn about.
  if (verdict.note === "unknown" && health?.chat === false) return { note: "no_chat", warning: warnings(route, m.toggle.noChat) };
  const warning =
    verdict.note === "unverified"
      ? m.toggle.unverified(verdict.why)
      : m.toggle.unknown(s.config.recipient.qq, s.config.recipient.anonQq, m.link.reason(verdict.why));
  return { note: verdict.note, warning: warnings(route, warning, m.notesExplained) };
}

export function registerToggleCommand(pi: ExtensionAPI, deps: ToggleDeps): void {
  const { report } = deps;
  pi.registerCommand("anon-notify", {
    description: deps.text().toggle.description,
    handler: async (args: string) => {
      if (args.trim() !== "") return report(deps.text().toggle.usage, "warning");
      // Switching on acts on the files as they are now, never on what the session read at its start.
      if (deps.session()?.active === false) await deps.refresh();
      const s = deps.session();
      if (!s) return report(deps.text().toggle.notReady, "warning");
      const m = s.text;
      if (s.subagent) return report(m.toggle.subagent, "error");
      // An invalid config changes nothing either way: the saved switch stays as it is, and shows.
      if (s.configState === "invalid") return report(m.toggle.invalidConfig(s.active, s.configErrors), "error");
      const next = !s.active;
      let enabled: { note: RecipientNote; warning: string | null } | undefined;
      if (next) {
        const preflight = await enablePreflight(s);
        if ("refuse" in preflight) return report(preflight.refuse, "error");
        enabled = preflight;
      }
      // Written first: a record that did not reach the session must not be claimed as the state.
      const failure = writeActivation(pi, { version: ACTIVATION_VERSION, active: next, via: "command" }, s.active);
      if (failure) return report(m.toggle.writeFailed(failure), "error");
      if (deps.session() !== s) return; // the session was replaced while the server was asked
      s.active = next;
      s.recipientNote = enabled?.note ?? null;
      await deps.changed(s);
      if (enabled?.warning) report(enabled.warning, "warning");
      report(enabled ? m.toggle.enabled(s.config?.recipient.qq ?? "", enabled.note) : m.toggle.disabledNow, "info");
    },
  });
}
