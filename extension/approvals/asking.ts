/** Asking a person, the one wait every approval takes: server request, terminal dialog, timeout and abort,
 * first answer wins (waits.ts); the request and resolution are posted beside the agent, never awaited. */
import { randomUUID } from "node:crypto";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { commandPreview, cutCommand } from "../../common/command-text.ts";
import { APPROVAL_LIMITS, type ApprovalRequest, type ApprovalSource } from "../../protocol/approvals.ts";
import type { Config } from "../config/schema-rules.ts";
import type { ApiClient } from "../server-client/http-client.ts";
import type { Notifier } from "../notices/notifier.ts";
import type { Messages } from "../texts/messages.ts";
import { type NoticeContext, truncate } from "../notices/notice-rules.ts";
import type { Report } from "../session/report.ts";
import { createOutgoing, type Outgoing } from "./outgoing.ts";
import { argsDigest } from "./policy-rules.ts";
import { Waits, type Answer } from "./waits.ts";

export interface ApprovalSession {
  ctx: ExtensionContext;
  sessionId: string;
  config: Config;
  /** Switched on with a server connection: the owner can answer from chat, the console or the API. */
  client: ApiClient | undefined;
  /** The server may have a chat: false once it said it has none (so the dialog never offers one). */
  chat: boolean;
  subagent: boolean;
  /** Where a "needs you" notice goes; undefined when the session does not notify. */
  notices: { notifier: Notifier; context(): NoticeContext } | undefined;
}

/** `command`: exactly what will run, literal secrets masked (not yet cut to the wire's limit); `actionCode`, `matched` and `argv`
 * come with `policy` calls (policy-rules.ts `RuleMatch`). */
export interface PendingCall {
  tool: string;
  toolCallId: string;
  input: unknown;
  action: string;
  actionCode?: string;
  reason: string;
  command: string;
  rules: string[];
  matched?: { rule: string; at: string }[];
  argv?: string[][];
  grantable: boolean;
  source: ApprovalSource;
}

type Wait = { approvalId: string; argsDigest: string; timeoutMs: number; ended: AbortSignal; dialogOpen: boolean };

export interface AskingDeps {
  runtimeId: string;
  report: Report;
  text(): Messages;
}

export class PersonAsking {
  readonly #deps: AskingDeps;
  readonly waits = new Waits();
  readonly #outgoing: Outgoing;
  /** Titles of the dialogs this extension opened, with how many are open. */
  readonly #ownDialogs = new Map<string, number>();
  #runSeq = 0;
  #inRun = false;

  constructor(deps: AskingDeps) {
    this.#deps = deps;
    this.#outgoing = createOutgoing((message) => deps.report(message), deps.text);
  }

  /** A top-level run started (Pi's agent_start also comes for each low-level run inside one). */
  runStarted(): void {
    if (!this.#inRun) this.#runSeq++;
    this.#inRun = true;
  }

  runSettled(): void {
    this.#inRun = false;
  }

  ownsDialog(title: string): boolean {
    return this.#ownDialogs.has(title);
  }

  async ask(s: ApprovalSession, ctx: ExtensionContext, call: PendingCall): Promise<Answer> {
    const timeoutMs = s.config.approval.timeoutMs;
    const approvalId = `ap-${randomUUID()}`;
    const binding = { tool_call_id: call.toolCallId, args_digest: argsDigest(call.input), cwd: ctx.cwd };
    const answer = this.waits.open(approvalId, binding);
    const ended = new AbortController();
    const wait: Wait = { approvalId, argsDigest: binding.args_digest, timeoutMs, ended: ended.signal, dialogOpen: false };
    if (s.client) this.#request(s.client, s, ctx, call, wait);

    const timer = setTimeout(() => this.waits.settle(approvalId, { outcome: "timeout", via: "timeout", reason: null }), timeoutMs);
    const signal = ctx.signal;
    const onAbort = () => this.waits.settle(approvalId, { outcome: "rejected", via: "aborted", reason: null });
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });
    if (ctx.hasUI) this.#openDialog(s, ctx, call, wait);

    const result = await answer;
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    ended.abort();
    if ((wait.dialogOpen && result.via !== "terminal") || (ctx.hasUI && result.grant)) this.#tellAnswer(ctx, call, result);
    this.#outgoing.resolve(approvalId, {
      session_id: s.sessionId,
      runtime_id: this.#deps.runtimeId,
      outcome: result.outcome,
      via: result.via,
      reason: result.reason,
    });
    return result;
  }

  /** Posts the request; the terminal hears how the owner is reached while its dialog is open. */
  #request(client: ApiClient, s: ApprovalSession, ctx: ExtensionContext, call: PendingCall, wait: Wait): void {
    const m = this.#deps.text().approvals;
    const now = Date.now();
    const uid = process.getuid?.();
    // The command as the wire carries it: head and tail past `commandChars`, with how much was left out.
    const cut = cutCommand(call.command, APPROVAL_LIMITS.commandChars);
    const body: ApprovalRequest = {
      approval_id: wait.approvalId,
      session_id: s.sessionId,
      runtime_id: this.#deps.runtimeId,
      run_id: `${this.#deps.runtimeId}.run.${this.#runSeq}`,
      tool_call_id: call.toolCallId,
      tool: call.tool,
      args_digest: wait.argsDigest,
      cwd: truncate(ctx.cwd, APPROVAL_LIMITS.cwdChars),
      action: call.action,
      reason: call.reason,
      command: cut.command,
      command_hidden_chars: cut.hiddenChars,
      rules: call.rules,
      ...(call.matched?.length ? { matched: call.matched.map(({ rule, at }) => ({ rule, at: truncate(at, APPROVAL_LIMITS.siteChars) })) } : {}),
      ...(call.argv ? { argv: call.argv } : {}),
      ...(uid === undefined ? {} : { agent_uid: uid }),
      grantable: call.grantable,
      source: call.source,
      ...(call.actionCode === undefined ? {} : { action_code: call.actionCode }),
      expires_at: new Date(now + wait.timeoutMs).toISOString(),
      created_at: new Date(now).toISOString(),
    };
    this.#outgoing.request(client, body, wait.ended, (code, reach, push, open) => {
      // A request a standing grant approved reaches nobody, and needs nobody: the grant's own line says so.
      if (!open || !wait.dialogOpen || wait.ended.aborted) return;
      // Not in the chat, but on its way to the phone: say that, not "not sent".
      if (push && reach !== "sent") ctx.ui.notify(m.requestPushed(code, push), "info");
      else ctx.ui.notify(m.requestReach[reach](code), reach === "sent" ? "info" : "warning");
    });
  }

  /** The terminal dialog; a dialog dismissed because the wait ended is no answer. */
  #openDialog(s: ApprovalSession, ctx: ExtensionContext, call: PendingCall, wait: Wait): void {
    const m = this.#deps.text().approvals;
    const ownDialogs = this.#ownDialogs;
    const title = m.dialogTitle(call.action);
    ownDialogs.set(title, (ownDialogs.get(title) ?? 0) + 1);
    wait.dialogOpen = true;
    const preview = commandPreview(call.command, APPROVAL_LIMITS.previewChars);
    const facts = {
      preview: preview.text,
      hiddenChars: preview.hiddenChars,
      totalChars: call.command.length,
      reason: call.reason,
      timeoutMs: wait.timeoutMs,
      remote: s.client !== undefined && s.chat,
    };
    ctx.ui
      .confirm(title, m.dialogMessage(facts), { signal: wait.ended })
      .then(
        (yes) => {
          if (!wait.ended.aborted) this.waits.settle(wait.approvalId, { outcome: yes ? "approved" : "rejected", via: "terminal", reason: null });
        },
        () => {},
      )
      .finally(() => {
        wait.dialogOpen = false;
        const left = (ownDialogs.get(title) ?? 1) - 1;
        // Pi announces the dialog's end after it closed; the title is forgotten a tick later.
        setImmediate(() => (left > 0 ? ownDialogs.set(title, left) : ownDialogs.delete(title)));
      });
  }

  /** The terminal told how a wait it did not answer ended. */
  #tellAnswer(ctx: ExtensionContext, call: PendingCall, result: Answer): void {
    const m = this.#deps.text().approvals;
    try {
      if (result.grant) ctx.ui.notify(m.grantApplied(call.action, result.via, result.grant.expires_at), "info");
      else ctx.ui.notify(m.answeredElsewhere(call.action, result), result.outcome === "approved" ? "info" : "warning");
    } catch {
      // A stale ctx after the session was replaced.
    }
  }
}
