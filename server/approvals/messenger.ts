/** What the owner is owed about approvals, one at a time in order: the request (past the cap, a digest),
 * the persona's mention, one closing message; marked on the row so a restart resumes, retried until sent. */
import { backoffDelayMs } from "../../common/backoff.ts";
import type { Context } from "koishi";
import { errorText } from "../../common/errors.ts";
import type { ApprovalReach } from "../../protocol/approvals.ts";
import type { EventBody } from "../../protocol/events.ts";
import type { AuditLog } from "../audit/store.ts";
import { isOpen, nextOutgoing, type ApprovalRecord } from "./decisions.ts";
import type { OwnerButton } from "../handover/direct.ts";
import { errorInWords } from "../handover/decisions.ts";
import { approvalButtons, GRANT_BUTTON_MINUTES } from "./buttons.ts";
import { instanceSay, type Say } from "../locales/load.ts";
import { closingText, mentionEvent, requestText, voiceOf, type Voice } from "./message-rules.ts";
import { decideDigest, decideRequestPace, type PaceLimit } from "./owner-pace-rules.ts";
import type { ApprovalStore, Marks } from "./store.ts";

export interface MessengerDeps {
  store: ApprovalStore;
  audit: AuditLog;
  /** Sends to the owner (with buttons where the platform has them); answers the platform message id; throws when it could not send. */
  send(text: string, buttons?: readonly OwnerButton[]): Promise<string | null>;
  /** The server's cap on a grant: the request's "Approve for N minutes" button grants no longer. */
  grantMaxMinutes: number;
  /** Hands the persona its mention (the event intake); throws when not accepted yet. */
  mention(event: EventBody): Promise<void>;
  personaPresent(): boolean;
  /** Whether there is an owner's chat to send to at all (a bot and a recipient configured). */
  chatConfigured: boolean;
  /** How many requests reach the owner on their own per window, all sessions together. */
  pace: PaceLimit;
}

const RETRY_FIRST_MS = 1_000;

export class ApprovalMessenger {
  readonly #ctx: Context;
  readonly #deps: MessengerDeps;
  #running = false;
  #again = false;
  #failures = 0;
  #retry: (() => void) | undefined;
  #stopped = false;
  /** The reason last warned about: an outage (no bot, say) is said once, not once per approval and retry. */
  #warned: string | undefined;
  /** Who waits to hear how the first attempt to send an approval's request went. */
  readonly #attempts = new Map<string, Set<() => void>>();
  /** The owner is written to in the instance's language (Koishi's i18n, its configured locales). */
  readonly #voice: Voice;
  readonly #say: Say;
  /** When the recent requests went out on their own (ms), and what the digests told the owner of. */
  #sentAtMs: number[] = [];
  #told = new Set<string>();
  #lastDigestAtMs: number | null = null;
  #digestTimer: (() => void) | undefined;

  constructor(ctx: Context, deps: MessengerDeps) {
    this.#ctx = ctx;
    this.#deps = deps;
    this.#say = instanceSay(ctx);
    this.#voice = voiceOf(this.#say);
    ctx.on("dispose", () => {
      this.#stopped = true;
      this.#retry?.();
      this.#digestTimer?.();
    });
  }

  /** How the owner is reached with this request: `sent` once it (or a digest counting it) is in their chat (waiting up to
   * `waitMs` for the attempt in progress), `queued` until then, `none` with no chat or when it will never be sent. */
  async reach(approvalId: string, waitMs: number): Promise<ApprovalReach> {
    if (!this.#deps.chatConfigured) return "none";
    let wake: (() => void) | undefined;
    const attempted = new Promise<void>((resolve) => (wake = resolve));
    const waiters = this.#attempts.get(approvalId) ?? new Set();
    this.#attempts.set(approvalId, waiters.add(wake!));
    try {
      const told = (row: ApprovalRecord | undefined) => !!row && (row.request_sent || (row.request_held && this.#told.has(row.approval_id)));
      const row = await this.#deps.store.get(approvalId);
      if (!row || row.grant_id) return "none";
      if (told(row)) return "sent";
      if (!isOpen(row.state) || (!row.request_held && nextOutgoing(row, false, true) !== "request")) return "none";
      let timer: (() => void) | undefined;
      await Promise.race([attempted, new Promise<void>((resolve) => (timer = this.#ctx.setTimeout(resolve, waitMs)))]);
      timer?.();
      return told(await this.#deps.store.get(approvalId)) ? "sent" : "queued";
    } finally {
      waiters.delete(wake!);
      if (waiters.size === 0) this.#attempts.delete(approvalId);
    }
  }

  #attempted(approvalId: string): void {
    for (const wake of this.#attempts.get(approvalId) ?? []) wake();
  }

  /** Something may be owed: work through it now (or right after the pass in progress). */
  kick(): void {
    if (this.#stopped) return;
    if (this.#running) {
      this.#again = true;
      return;
    }
    this.#retry?.();
    this.#retry = undefined;
    void this.#pass();
  }

  async #pass(): Promise<void> {
    this.#running = true;
    let failed = false;
    try {
      do {
        this.#again = false;
        for (const row of await this.#deps.store.owing()) {
          if (this.#stopped) return;
          if (!(await this.#settle(row))) failed = true;
        }
      } while (this.#again && !failed);
      if (!failed) await this.#digest();
    } catch (error) {
      // Shutdown closes the database (and the texts) under a pass in progress: nothing failed, and
      // what is owed stays in the table for the next start.
      if (this.#stopped) return;
      this.#ctx.logger("notify-webhook").warn(this.#say("anon-notify.log.approval-messages", { error: errorText(error) }));
      failed = true;
    } finally {
      this.#running = false;
    }
    if (failed && !this.#stopped) {
      this.#retry = this.#ctx.setTimeout(() => this.kick(), backoffDelayMs(++this.#failures, RETRY_FIRST_MS, Math.random));
    } else {
      this.#failures = 0;
      this.#warned = undefined;
    }
  }

  /** One message counting the held requests the owner was not told of yet; at most one a window. */
  async #digest(): Promise<void> {
    const { store, audit, pace } = this.#deps;
    const waiting = await store.heldWaiting();
    const now = Date.now();
    const decision = decideDigest({ waiting, told: this.#told, lastAtMs: this.#lastDigestAtMs, nowMs: now }, pace);
    if (decision.kind === "wait" && !this.#digestTimer)
      this.#digestTimer = this.#ctx.setTimeout(() => {
        this.#digestTimer = undefined;
        this.kick();
      }, decision.untilMs - now);
    if (decision.kind !== "send") return;
    const text = this.#voice.say("digest", { count: decision.count, cap: pace.cap });
    const messageId = await this.#deps.send(text);
    this.#told = new Set(waiting);
    this.#lastDigestAtMs = now;
    await audit.record({ actor: "server", action: "approval.digest_sent", data: { count: decision.count, message_id: messageId, text, approvals: waiting } });
    for (const id of waiting) this.#attempted(id);
  }

  #audit(action: string, row: ApprovalRecord, data: Record<string, unknown> = {}) {
    return this.#deps.audit.record({ actor: "server", action, session_id: row.session_id, subject: row.approval_id, data: { code: row.code, ...data } });
  }

  /** A message to the owner: sent, marked on the row, then on the audit trail with its text. */
  async #sendToOwner(row: ApprovalRecord, text: string, action: string, marks: (id: string | null) => Marks, buttons?: OwnerButton[]) {
    const messageId = await this.#deps.send(text, buttons ?? []);
    await this.#deps.store.mark(row.approval_id, marks(messageId));
    await this.#audit(action, row, { message_id: messageId, text });
  }

  /** Sends everything owed for one approval, in order; false when a send failed (tried again later). */
  async #settle(initial: ApprovalRecord): Promise<boolean> {
    const { store } = this.#deps;
    let row: ApprovalRecord | undefined = initial;
    for (;;) {
      if (!row) return true;
      const next = nextOutgoing(row, this.#deps.personaPresent(), this.#deps.chatConfigured);
      if (!next) {
        // Nothing owed that can be sent: a mention with no persona present is not owed.
        if (!row.persona_mentioned && !this.#deps.personaPresent()) await store.mark(row.approval_id, { persona_mentioned: true });
        return true;
      }
      if (next === "request" && decideRequestPace(this.#sentAtMs, Date.now(), this.#deps.pace) === "hold") {
        // Past the cap a request is held for the digest, and not mentioned to the persona either.
        await store.mark(row.approval_id, { request_held: true, persona_mentioned: true });
        await this.#audit("approval.request_held", row);
        row = await store.get(row.approval_id);
        continue;
      }
      try {
        if (next === "request") {
          const buttons = approvalButtons(row, this.#voice, Math.min(GRANT_BUTTON_MINUTES, this.#deps.grantMaxMinutes));
          const marks = (id: string | null) => ({ request_sent: true, request_message_id: id });
          await this.#sendToOwner(row, requestText(row, new Date(), this.#voice), "approval.request_sent", marks, buttons);
          const now = Date.now();
          this.#sentAtMs = [...this.#sentAtMs.filter((at) => now - at < this.#deps.pace.windowMs), now];
          this.#attempted(row.approval_id);
        } else if (next === "mention") {
          await this.#deps.mention(mentionEvent(row, new Date(), this.#voice));
          await store.mark(row.approval_id, { persona_mentioned: true });
        } else if (next === "closing") {
          await this.#sendToOwner(row, closingText(row, this.#voice), "approval.closing_sent", () => ({ closing_sent: true }));
        } else {
          // The owner never saw the request: no closing message for it either.
          await store.mark(row.approval_id, { closing_sent: true, persona_mentioned: true });
        }
      } catch (error) {
        if (next === "request") this.#attempted(row.approval_id);
        const reason = errorText(error);
        const logger = this.#ctx.logger("notify-webhook");
        const facts = { code: row.code, part: this.#voice.say(`part.${next}`), reason: errorInWords(this.#say, reason) };
        if (reason === this.#warned) logger.debug(this.#voice.say("not-sent-again", facts));
        else logger.warn(this.#voice.say("not-sent", facts));
        this.#warned = reason;
        return false;
      }
      row = await store.get(row.approval_id);
    }
  }
}
