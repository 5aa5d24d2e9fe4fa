/** What both channels share for one start: the connection, the one journal writer, the claim request and
 * its margins, and the ACK with retry. */
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { ReportOnce } from "../../common/report-once.ts";
import { AckAnswer, ClaimAnswer, type ClaimedCommand } from "../../protocol/queue.ts";
import { asServerError, needsNoWarning, realSleep, retryDelayMs, runWithRetry } from "../server-client/retry.ts";
import type { Messages } from "../texts/messages.ts";
import type { Connection, Presence } from "../presence/presence.ts";
import type { ServerHeard } from "../server-client/server-facts.ts";
import type { Applied } from "./control-rules.ts";
import { type CommandJournal, openCommandJournal } from "./journal.ts";

/** Beyond `wait_ms`, how long the client waits for the server to answer a held claim. */
export const CLAIM_MARGIN_MS = 5_000;
/** A claim the server answers at once (a turn end's, or every poll when long polling is off). */
export const QUICK_CLAIM_TIMEOUT_MS = 10_000;
export const ACK_TIMEOUT_MS = 10_000;
export const ACK_ATTEMPTS = 3;
export const RETRY_BASE_MS = 500;

type LaneDeps = { runtimeId: string; presence: Pick<Presence, "beat">; server: ServerHeard; report: (message: string) => void; text: () => Messages };

export class LaneConnection {
  readonly settings: Connection["config"]["command"];
  /** Shared by both lanes: a failure one lane reported is not told again by the other. */
  readonly reports: ReportOnce;
  /** The journal once open; undefined before, or if it cannot be read (then no lane claims). */
  journal: CommandJournal | undefined;
  /** Resolves once the journal is open and the server accepted this runtime's heartbeat, false if either fails. */
  readonly ready: Promise<boolean>;
  readonly #connection: Connection;
  readonly #deps: LaneDeps;

  constructor(connection: Connection, deps: LaneDeps) {
    this.#connection = connection;
    this.settings = connection.config.command;
    this.reports = new ReportOnce(deps.report);
    this.#deps = deps;
    this.ready = this.#open();
  }

  get text(): Messages {
    return this.#deps.text();
  }

  async #open(): Promise<boolean> {
    const file = this.settings.journal;
    try {
      const opened = await openCommandJournal(file);
      this.journal = opened.journal;
      if (opened.skippedLines > 0) this.#deps.report(this.text.commands.journalSkipped(file, opened.skippedLines));
    } catch (error) {
      // Without the journal no delivery could be deduplicated, so the channels stay off.
      this.#deps.report(this.text.commands.journalUnreadable(file, errorText(error)));
      return false;
    }
    // The server lets a runtime claim only after it has seen that runtime's heartbeat.
    return this.#deps.server.whenAccepted();
  }

  claim(sessionId: string, waitMs: number, query: { lane?: "control"; capabilities?: "images" }, signal: AbortSignal) {
    return this.#connection.client.request("GET", "commands", {
      query: { session_id: sessionId, runtime_id: this.#deps.runtimeId, ...query, wait_ms: waitMs },
      timeoutMs: waitMs > 0 ? waitMs + CLAIM_MARGIN_MS : QUICK_CLAIM_TIMEOUT_MS,
      schema: ClaimAnswer,
      signal,
    });
  }

  /** After a failed claim: a lost runtime re-registered by a heartbeat, the failure told once; returns the wait (≤ the heartbeat interval). */
  claimFailed(thrown: unknown, failures: number, reports: ReportOnce, wording: (why: string) => string): number {
    const error = asServerError(thrown);
    if (error.code === "session_offline") this.#deps.presence.beat();
    if (!needsNoWarning(error)) reports.report(wording(this.text.delivery.why(error)));
    // Capped so that a server that comes back is reached within one heartbeat.
    return Math.min(retryDelayMs(error, failures, RETRY_BASE_MS, Math.random), this.#connection.config.presence.heartbeatIntervalMs);
  }

  /** Journals the command (flushed) unless `journaled`, then ACKs it, retried: without its journal line there is no ACK, so the lease runs out and the
   * redelivery tries again. A failed ACK is told (with `wording`) unless the client already told it. */
  async confirm(
    command: Pick<ClaimedCommand, "command_id" | "event_id">,
    lease: { sessionId: string; token: string; journaled: boolean },
    wording: (why: string) => string,
    { outcome, run }: Partial<Applied> = {},
  ): Promise<void> {
    const { command_id, event_id } = command;
    try {
      if (!this.journal) throw new Error("journal not open");
      const delivered_at = new Date().toISOString();
      if (!lease.journaled) await this.journal.record({ command_id, event_id, session_id: lease.sessionId, delivered_at, outcome, run });
    } catch (error) {
      return this.reports.report(this.text.commands.journalWriteFailed(this.settings.journal, errorText(error)));
    }
    const body = { session_id: lease.sessionId, lease_token: lease.token, runtime_id: this.#deps.runtimeId, outcome, ...(run ? { run } : {}) };
    const ack = () =>
      this.#connection.client.request("POST", `commands/${encodeURIComponent(command_id)}/ack`, { body, timeoutMs: ACK_TIMEOUT_MS, schema: AckAnswer });
    const acked = await runWithRetry(ack, { maxAttempts: ACK_ATTEMPTS, backoffMs: RETRY_BASE_MS, sleep: realSleep, random: Math.random });
    if (!acked.ok && !needsNoWarning(acked.error)) this.reports.report(wording(this.text.delivery.why(acked.error)));
  }
}

/** A stale context (the session was replaced) counts as busy: its abort then fails loudly, not silently. */
export function isIdle(ctx: ExtensionContext | undefined): boolean {
  try {
    return ctx?.isIdle() ?? false;
  } catch {
    return false;
  }
}
