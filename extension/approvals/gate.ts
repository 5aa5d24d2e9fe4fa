/**
 * The approval gate, Pi's side: Pi's `tool_call` event checks each call exactly as it will run
 * against the policy; a call that needs a person waits on a local promise (waits.ts) that the
 * server's decision (control lane), the terminal dialog, the timeout or the run's abort settles,
 * first answer wins. The request and the resolution go to the server through the outgoing queue,
 * never awaited here. Without a person the policy answers at once.
 *
 * Also: the opt-in `ask_approval` tool (offered while approvals are on in a switched-on main
 * session), and one "needs you" notice per dialog another extension opens while Pi waits on it.
 */
import { randomUUID } from "node:crypto";
import { tmpdir, homedir } from "node:os";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { Type, type Static } from "typebox";
import { commandPreview, cutCommand } from "../../common/command-text.ts";
import { errorText } from "../../common/errors.ts";
import { redactSecrets } from "../../common/redact.ts";
import { APPROVAL_LIMITS, ASK_RULE, ApprovalDecisionPayload, type ApprovalSource } from "../../protocol/approvals.ts";
import type { EventBody } from "../../protocol/events.ts";
import type { Config } from "../config/schema.ts";
import type { ControlRegistry } from "../control/dispatcher.ts";
import type { ApiClient } from "../delivery/http-client.ts";
import type { Notifier } from "../delivery/notifier.ts";
import type { Messages } from "../messages.ts";
import type { HandOver } from "../notices/hand-over.ts";
import { buildEvent, truncate, type NoticeContext } from "../notices/notice.ts";
import type { Report } from "../session/report.ts";
import { createOutgoing, type Outgoing } from "./outgoing.ts";
import { argsDigest, canonicalJson, commandLine, decideGate, grantable, matchCall, personPresent, type RuleMatch } from "./policy.ts";
import { loadShell, type ShellReader } from "./shell.ts";
import { Waits, type Answer } from "./waits.ts";
import { offeredTool } from "../pi-handlers.ts";

export const ASK_TOOL_NAME = "ask_approval";

/** The tool's parameters, described to the model in the session's language. */
export function askParams(words?: Messages["tools"]["ask"]["params"]) {
  return Type.Object(
    {
      action: Type.String({ minLength: 1, maxLength: APPROVAL_LIMITS.actionChars, description: words?.action }),
      reason: Type.String({ minLength: 1, maxLength: APPROVAL_LIMITS.reasonChars, description: words?.reason(APPROVAL_LIMITS.reasonChars) }),
      payload: Type.Optional(Type.String({ maxLength: APPROVAL_LIMITS.previewChars, description: words?.payload })),
    },
    { additionalProperties: false },
  );
}
export type AskArgs = Static<ReturnType<typeof askParams>>;

/** The bound session as the gate needs it. */
export interface ApprovalSession {
  ctx: ExtensionContext;
  sessionId: string;
  config: Config;
  /** Switched on with a server connection: the owner can answer from chat. */
  client: ApiClient | undefined;
  subagent: boolean;
  /** Where a "needs you" notice goes; undefined when the session does not notify. */
  notices: { notifier: Notifier; context(): NoticeContext } | undefined;
}

export interface ApprovalDeps {
  runtimeId: string;
  session(): ApprovalSession | undefined;
  /** The control channel, where a person's decision from the server arrives (`approval_decision`). */
  control: ControlRegistry;
  report: Report;
  /** The queue every notice takes to the notifier, just after Pi's handler: a "needs you" notice too. */
  handOver: HandOver;
  /** The bound session's texts: what the person and the model read. */
  text(): Messages;
}

export interface Approvals {
  /** The ask_approval tool as a session service: offered while the session is active. */
  start(ctx: ExtensionContext): void;
  stop(): Promise<void>;
}

interface PendingCall {
  tool: string;
  toolCallId: string;
  input: unknown;
  action: string;
  reason: string;
  /** Exactly what will run, literal secrets masked (not yet cut to the wire's limit). */
  command: string;
  rules: string[];
  grantable: boolean;
  source: ApprovalSource;
}

/**
 * What will run, for the person: a command tool's command verbatim; for write/edit the tool, the
 * path and the size (the digest binds the exact content); else the canonical arguments. Only
 * literal secret values are masked.
 */
export function commandOf(m: Messages["approvals"], tool: string, input: Record<string, unknown>): string {
  const line = commandLine({ tool, input });
  const text =
    line ??
    (typeof input.path === "string" && (tool === "write" || tool === "edit")
      ? `${tool} ${input.path}${typeof input.content === "string" ? m.previewChars(input.content.length) : ""}`
      : `${tool} ${canonicalJson(input)}`);
  return redactSecrets(text) || tool;
}

/** The command as the wire carries it: head and tail past `commandChars`, with how much was left out. */
function wireCommand(text: string): { command: string; command_hidden_chars: number } {
  const { command, hiddenChars } = cutCommand(text, APPROVAL_LIMITS.commandChars);
  return { command, command_hidden_chars: hiddenChars };
}

export function installApprovals(pi: ExtensionAPI, deps: ApprovalDeps): Approvals {
  const waits = new Waits();
  const outgoing: Outgoing = createOutgoing((message) => deps.report(message), deps.text);
  /** Titles of the dialogs this extension opened: Pi announces them like anyone's. */
  const ownDialogs = new Map<string, number>();
  let runSeq = 0;
  let inRun = false;

  // A person's decision from the server settles the wait it names, if that wait is still open and bound the same.
  deps.control.on("approval_decision", (command) => {
    const payload = ApprovalDecisionPayload.safeParse(command.payload);
    return payload.success ? waits.decide(payload.data) : "unknown";
  });

  pi.on("agent_start", () => {
    if (!inRun) runSeq++;
    inRun = true;
  });
  pi.on("agent_settled", () => {
    inRun = false;
  });

  /** Waits for a person; resolves with the first answer. Never awaits the network. */
  async function askPerson(s: ApprovalSession, ctx: ExtensionContext, call: PendingCall): Promise<Answer> {
    const timeoutMs = s.config.approval.timeoutMs;
    const m = deps.text().approvals;
    const approvalId = `ap-${randomUUID()}`;
    const binding = { tool_call_id: call.toolCallId, args_digest: argsDigest(call.input), cwd: ctx.cwd };
    const answer = waits.open(approvalId, binding);
    const ended = new AbortController();
    const now = Date.now();
    let dialogOpen = false;

    if (s.client) {
      outgoing.request(
        s.client,
        {
          approval_id: approvalId,
          session_id: s.sessionId,
          runtime_id: deps.runtimeId,
          run_id: `${deps.runtimeId}.run.${runSeq}`,
          tool_call_id: call.toolCallId,
          tool: call.tool,
          args_digest: binding.args_digest,
          cwd: truncate(ctx.cwd, APPROVAL_LIMITS.cwdChars),
          action: call.action,
          reason: call.reason,
          ...wireCommand(call.command),
          rules: call.rules,
          grantable: call.grantable,
          source: call.source,
          expires_at: new Date(now + timeoutMs).toISOString(),
          created_at: new Date(now).toISOString(),
        },
        ended.signal,
        (code, reach) => {
          if (dialogOpen && !ended.signal.aborted) ctx.ui.notify(m.requestReach[reach](code), reach === "sent" ? "info" : "warning");
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
        remote: s.client !== undefined,
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
    outgoing.resolve(approvalId, { session_id: s.sessionId, runtime_id: deps.runtimeId, outcome: result.outcome, via: result.via, reason: result.reason });
    return result;
  }

  /**
   * The bash grammar loads once (local WASM; reading is synchronous after that). If it cannot load,
   * every command reads as unparsable, so each one asks: never let through unseen.
   */
  let reader: Promise<ShellReader> | undefined;
  const shellReader = () =>
    (reader ??= loadShell().catch((error: unknown) => {
      deps.report(deps.text().approvals.grammarUnavailable(errorText(error)));
      return () => undefined;
    }));

  const present = (s: ApprovalSession, ctx: ExtensionContext) =>
    personPresent({ mode: ctx.mode, hasUI: ctx.hasUI, active: s.client !== undefined, subagent: s.subagent });

  pi.on("tool_call", async (event, ctx) => {
    if (event.toolName === ASK_TOOL_NAME) return undefined;
    const s = deps.session();
    if (!s?.config.approval.enabled) return undefined;
    const input = event.input as Record<string, unknown>;
    const place = { cwd: ctx.cwd, home: homedir(), tempDirs: [tmpdir()] };
    const match: RuleMatch | undefined = matchCall({ tool: event.toolName, input }, place, s.config.approval, await shellReader());
    const decision = decideGate(match, present(s, ctx), s.config.approval.noPerson);
    if (decision.kind === "allow") return undefined;
    const m = deps.text().approvals;
    if (decision.kind === "block") return { block: true, reason: m.noPerson(decision.match.action, decision.match.rules) };
    const digest = argsDigest(input);
    const answer = await askPerson(s, ctx, {
      tool: event.toolName,
      toolCallId: event.toolCallId,
      input,
      action: decision.match.action,
      reason: truncate(m.rules(decision.match.rules), APPROVAL_LIMITS.reasonChars),
      command: commandOf(m, event.toolName, input),
      rules: decision.match.rules,
      grantable: grantable(decision.match.rules, s.config.approval),
      source: "policy",
    });
    if (answer.outcome !== "approved") return { block: true, reason: m.refusal(decision.match.action, answer, s.config.approval.timeoutMs) };
    // Approved for exactly these arguments: if anything changed them while the call waited, it does not run.
    if (argsDigest(event.input) !== digest) return { block: true, reason: m.mismatch(decision.match.action) };
    return undefined;
  });

  async function executeAsk(toolCallId: string, params: AskArgs, ctx: ExtensionContext) {
    const s = deps.session();
    const m = deps.text().approvals;
    const respond = (answer: Answer) => ({ content: [{ type: "text" as const, text: m.askResult(answer) }], details: answer });
    if (!s?.config.approval.enabled || !present(s, ctx)) return respond({ outcome: "rejected", via: "policy", reason: m.nobodyToAsk });
    const answer = await askPerson(s, ctx, {
      tool: ASK_TOOL_NAME,
      toolCallId,
      input: params,
      action: params.action,
      reason: redactSecrets(params.reason),
      command: redactSecrets(params.payload ?? "") || params.action,
      rules: [ASK_RULE],
      grantable: false,
      source: "ask_approval",
    });
    return respond(answer);
  }

  // Pi announces every blocking dialog; one not opened here means the agent waits on the person.
  pi.on("ui_prompt_start", (event) => {
    if (event.title !== undefined && ownDialogs.has(event.title)) return;
    const s = deps.session();
    if (!s?.config.approval.needsYou || !s.notices) return;
    const context = s.notices.context();
    // Not a final: after a crash the dialog is gone, so the outbox must not resend it.
    deps.handOver.enqueue(s.notices.notifier, needsYouNotice(event.kind, event.title, context), { final: false, throttled: false });
  });

  // Described in the session's language; registered again when a later session speaks another.
  const askTool = offeredTool(pi, ASK_TOOL_NAME, () => {
    const t = deps.text().tools.ask;
    pi.registerTool({
      name: ASK_TOOL_NAME,
      label: t.label,
      description: t.description,
      promptSnippet: t.snippet,
      parameters: askParams(t.params),
      execute: (toolCallId, params, _signal, _onUpdate, ctx) => executeAsk(toolCallId, params, ctx),
    });
  });

  return {
    start() {
      const s = deps.session();
      if (s?.config.approval.enabled && !s.subagent) askTool.offer(deps.text().language);
    },
    async stop() {
      askTool.withdraw();
    },
  };
}

/** The one notice for a dialog Pi waits on: urgent like an approval, so muting never holds it. */
export function needsYouNotice(kind: string, title: string | undefined, context: NoticeContext): EventBody {
  const t = context.text;
  const line = t.needsYou(title ?? null, kind);
  return buildEvent(
    {
      eventId: `pi:${context.sessionId}:needs-you:${randomUUID()}`,
      sessionId: context.sessionId,
      runtimeId: context.runtimeId,
      source: context.source,
      task: "",
      status: "warning",
      summary: context.content.includeProject ? t.inProject(context.project, line) : line,
      details: { needs_you: true, prompt: { kind, title: title ?? null } },
      contextUsage: context.contextUsage,
      createdAt: context.now,
    },
    context.content,
  );
}
