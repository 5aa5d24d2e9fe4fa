/** Asking a person, the one wait every approval takes: server request, terminal dialog, timeout and abort,
 * first answer wins (waits.ts); the request and resolution are posted beside the agent, never awaited. */
import { randomUUID } from "node:crypto";
import type { ExtensionContext } from "@earendil-works/pi-coding-agent";
import { commandPreview, cutCommand } from "../../common/command-text.ts";
import { APPROVAL_LIMITS, type ApprovalDecisionOutcome, type ApprovalDecisionPayload, type ApprovalSource } from "../../protocol/approvals.ts";
import type { Config } from "../config/schema-rules.ts";
import type { ApiClient } from "../server-client/http-client.ts";
import type { Notifier } from "../notices/notifier.ts";
import type { Messages } from "../texts/messages.ts";
import { type NoticeContext, truncate } from "../notices/notice-rules.ts";
import type { Report } from "../session/report.ts";
import { createOutgoing, type Outgoing } from "./outgoing.ts";
import { argsDigest } from "./policy-rules.ts";
import { Waits, type Answer } from "./waits.ts";

/** The bound session as approvals need it. */
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

export interface PendingCall {
  tool: string;
  toolCallId: string;
  input: unknown;
  action: string;
  /** What `action` is, for the server to word in its own language (`policy` calls only). */
  actionCode?: string;
  reason: string;
  /** Exactly what will run, literal secrets masked (not yet cut to the wire's limit). */
  command: string;
  rules: string[];
  /** Where each rule matched (`policy` calls). */
  matched?: { rule: string; at: string }[];
  /** The literal words of every command, when all resolved (`policy` calls). */
  argv?: string[][];
  grantable: boolean;
  source: ApprovalSource;
}

/** The command as the wire carries it: head and tail past `commandChars`, with how much was left out. */
function wireCommand(text: string): { command: string; command_hidden_chars: number } {
  const { command, hiddenChars } = cutCommand(text, APPROVAL_LIMITS.commandChars);
  return { command, command_hidden_chars: hiddenChars };
}

export interface AskingDeps {
  runtimeId: string;
  report: Report;
  text(): Messages;
}

export class PersonAsking {
  readonly #deps: AskingDeps;
  readonly #waits = new Waits();
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

  /** Whether a dialog with this title is one this extension opened. */
  ownsDialog(title: string): boolean {
    return this.#ownDialogs.has(title);
  }

  /** A person's decision from the server: settles the wait it names, if still open and bound the same. */
  decide(payload: ApprovalDecisionPayload): ApprovalDecisionOutcome {
    return this.#waits.decide(payload);
  }

  /** Waits for a person; resolves with the first answer. Never awaits the network. */
  async ask(s: ApprovalSession, ctx: ExtensionContext, call: PendingCall): Promise<Answer> {
    const waits = this.#waits;
    const ownDialogs = this.#ownDialogs;
    const timeoutMs = s.config.approval.timeoutMs;
    const m = this.#deps.text().approvals;
    const approvalId = `ap-${randomUUID()}`;
    const binding = { tool_call_id: call.toolCallId, args_digest: argsDigest(call.input), cwd: ctx.cwd };
    const answer = waits.open(approvalId, binding);
    const ended = new AbortController();
    const now = Date.now();
    let dialogOpen = false;

    if (s.client) {
      this.#outgoing.request(
        s.client,
        {
          approval_id: approvalId,
          session_id: s.sessionId,
          runtime_id: this.#deps.runtimeId,
          run_id: `${this.#deps.runtimeId}.run.${this.#runSeq}`,
          tool_call_id: call.toolCallId,
          tool: call.tool,
          args_digest: binding.args_digest,
          cwd: truncate(ctx.cwd, APPROVAL_LIMITS.cwdChars),
          action: call.action,
          reason: call.reason,
          ...wireCommand(call.command),
          rules: call.rules,
          ...(call.matched?.length ? { matched: call.matched.map(({ rule, at }) => ({ rule, at: truncate(at, APPROVAL_LIMITS.siteChars) })) } : {}),
          ...(call.argv ? { argv: call.argv } : {}),
          grantable: call.grantable,
          source: call.source,
          ...(call.actionCode === undefined ? {} : { action_code: call.actionCode }),
          expires_at: new Date(now + timeoutMs).toISOString(),
          created_at: new Date(now).toISOString(),
        },
        ended.signal,
        (code, reach, push, open) => {
          // A request a standing grant approved reaches nobody, and needs nobody: the grant's own line says so.
          if (!open || !dialogOpen || ended.signal.aborted) return;
          // Not in the chat, but on its way to the phone: say that, not "not sent".
          if (push && reach !== "sent") ctx.ui.notify(m.requestPushed(code, push), "info");
          else ctx.ui.notify(m.requestReach[reach](code), reach === "sent" ? "info" : "warning");
        },
      );
    }

    const timer = setTimeout(() => waits.settle(approvalId, { outcome: "timeout", via: "timeout", reason: null }), timeoutMs);
    const signal = ctx.signal;
    const onAbort = () => waits.settle(approvalId, { outcome: "rejected", via: "aborted", reason: null });
    if (signal?.aborted) onAbort();
    signal?.addEventListener("abort", onAbort, { once: true });

    if (ctx.hasUI) {
      const title = m.dialogTitle(call.action);
      ownDialogs.set(title, (ownDialogs.get(title) ?? 0) + 1);
      dialogOpen = true;
      const preview = commandPreview(call.command, APPROVAL_LIMITS.previewChars);
      const facts = {
        preview: preview.text,
        hiddenChars: preview.hiddenChars,
        totalChars: call.command.length,
        reason: call.reason,
        timeoutMs,
        remote: s.client !== undefined && s.chat,
      };
      ctx.ui
        .confirm(title, m.dialogMessage(facts), { signal: ended.signal })
        .then(
          (yes) => {
            // A dialog dismissed because the wait ended is no answer.
            if (!ended.signal.aborted) waits.settle(approvalId, { outcome: yes ? "approved" : "rejected", via: "terminal", reason: null });
          },
          () => {},
        )
        .finally(() => {
          dialogOpen = false;
          const left = (ownDialogs.get(title) ?? 1) - 1;
          // Pi announces the dialog's end after it closed; the title is forgotten a tick later.
          setImmediate(() => (left > 0 ? ownDialogs.set(title, left) : ownDialogs.delete(title)));
        });
    }

    const result = await answer;
    clearTimeout(timer);
    signal?.removeEventListener("abort", onAbort);
    ended.abort();
    if ((dialogOpen && result.via !== "terminal") || (ctx.hasUI && result.grant)) {
      try {
        if (result.grant) ctx.ui.notify(m.grantApplied(call.action, result.via, result.grant.expires_at), "info");
        else ctx.ui.notify(m.answeredElsewhere(call.action, result), result.outcome === "approved" ? "info" : "warning");
      } catch {
        // A stale ctx after the session was replaced.
      }
    }
    this.#outgoing.resolve(approvalId, {
      session_id: s.sessionId,
      runtime_id: this.#deps.runtimeId,
      outcome: result.outcome,
      via: result.via,
      reason: result.reason,
    });
    return result;
  }
}
