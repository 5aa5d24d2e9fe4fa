/** The approval gate on Pi's `tool_call`: a call that needs a person waits only on a local promise
 * (waits.ts), never on the network; also the opt-in `ask_approval` tool and the dialog "needs you" notice. */
import { randomUUID } from "node:crypto";
import { tmpdir, homedir } from "node:os";
import { dirname } from "node:path";
import type { ExtensionAPI, ExtensionContext, ToolCallEvent } from "@earendil-works/pi-coding-agent";
import { Type, type Static } from "typebox";
import { errorText } from "../../common/errors.ts";
import { redactSecrets } from "../../common/redact.ts";
import { APPROVAL_LIMITS, ASK_RULE, ApprovalDecisionPayload } from "../../protocol/approvals.ts";
import type { EventBody } from "../../protocol/events.ts";
import { DialogKind } from "../../protocol/said.ts";
import type { ControlRegistry } from "../command-channel/control-channel.ts";
import type { Messages } from "../texts/messages.ts";
import type { HandOver } from "../notices/hand-over.ts";
import { buildEvent, saidLine, truncate, type NoticeContext } from "../notices/notice-rules.ts";
import { type ApprovalSession, type AskingDeps, PersonAsking } from "./asking.ts";
import { argsDigest, canonicalJson, commandLine, decideGate, grantable, matchCall, personPresent } from "./policy-rules.ts";
import { loadShell, type ShellReader } from "./shell-rules.ts";
import type { Answer } from "./waits.ts";
import { type OfferedTool, offeredTool } from "../pi-handlers.ts";

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

/** `control`: where a person's decision from the server arrives; `handOver`: the queue every notice takes to the notifier. */
export interface ApprovalDeps extends AskingDeps {
  session(): ApprovalSession | undefined;
  control: ControlRegistry;
  handOver: HandOver;
}

/** What will run, for the person: a command verbatim; for write/edit the path and size (the digest binds the content); else the
 * canonical arguments. Only literal secret values are masked. */
export function commandOf(m: Messages["approvals"], tool: string, input: Record<string, unknown>): string {
  const line = commandLine({ tool, input });
  const text =
    line ??
    (typeof input.path === "string" && (tool === "write" || tool === "edit")
      ? `${tool} ${input.path}${typeof input.content === "string" ? m.previewChars(input.content.length) : ""}`
      : `${tool} ${canonicalJson(input)}`);
  return redactSecrets(text) || tool;
}

export class ApprovalGate {
  readonly #deps: ApprovalDeps;
  readonly #asking: PersonAsking;
  readonly #askTool: OfferedTool;
  #reader: Promise<ShellReader> | undefined;

  constructor(pi: ExtensionAPI, deps: ApprovalDeps) {
    this.#deps = deps;
    const asking = (this.#asking = new PersonAsking(deps));
    // A person's decision from the server settles the wait it names, if that wait is still open and bound the same.
    deps.control.on("approval_decision", (command) => {
      const payload = ApprovalDecisionPayload.safeParse(command.payload);
      return payload.success ? asking.waits.decide(payload.data) : "unknown";
    });
    pi.on("agent_start", () => asking.runStarted());
    pi.on("agent_settled", () => asking.runSettled());
    pi.on("tool_call", (event, ctx) => (event.toolName === ASK_TOOL_NAME ? undefined : this.#gate(event, ctx)));
    // Pi announces every blocking dialog; one not opened here means the agent waits on the person.
    pi.on("ui_prompt_start", (event) => {
      if (event.title !== undefined && asking.ownsDialog(event.title)) return;
      const s = deps.session();
      if (!s?.config.approval.needsYou || !s.notices) return;
      const context = s.notices.context();
      // Not a final: after a crash the dialog is gone, so the outbox must not resend it.
      deps.handOver.enqueue(s.notices.notifier, needsYouNotice(event.kind, event.title, context), { final: false, throttled: false });
    });
    // Described in the session's language; registered again when a later session speaks another.
    this.#askTool = offeredTool(pi, ASK_TOOL_NAME, () => {
      const t = deps.text().tools.ask;
      pi.registerTool({
        name: ASK_TOOL_NAME,
        label: t.label,
        description: t.description,
        promptSnippet: t.snippet,
        parameters: askParams(t.params),
        execute: (toolCallId, params, _signal, _onUpdate, ctx) => this.#executeAsk(toolCallId, params, ctx),
      });
    });
  }

  /** The ask_approval tool is offered while the session is active. */
  start(): void {
    const s = this.#deps.session();
    if (s?.config.approval.enabled && !s.subagent) this.#askTool.offer(this.#deps.text().language);
  }

  async stop(): Promise<void> {
    this.#askTool.withdraw();
  }

  /** Loaded once (local WASM; reading is synchronous after that); if it cannot load, every command reads as unparsable and asks. */
  #shellReader(): Promise<ShellReader> {
    this.#reader ??= loadShell().catch((error: unknown) => {
      this.#deps.report(this.#deps.text().approvals.grammarUnavailable(errorText(error)));
      return () => undefined;
    });
    return this.#reader;
  }

  /** Pi's `tool_call`: the call as it will run, against the policy; a block carries the words the model reads. */
  async #gate(event: ToolCallEvent, ctx: ExtensionContext): Promise<{ block: true; reason: string } | undefined> {
    const s = this.#deps.session();
    if (!s?.config.approval.enabled) return undefined;
    const input = event.input as Record<string, unknown>;
    const place = { cwd: ctx.cwd, home: homedir(), tempDirs: [tmpdir()], roots: ownPaths(s.config) };
    const m = this.#deps.text().approvals;
    const match = matchCall({ tool: event.toolName, input }, place, s.config.approval, await this.#shellReader(), m.actions);
    const decision = decideGate(match, present(s, ctx), s.config.approval.noPerson);
    if (decision.kind === "allow") return undefined;
    if (decision.kind === "block") return { block: true, reason: m.noPerson(decision.match.action, decision.match.rules) };
    // The whole command or none: a person never approves what they were shown only in part.
    const command = commandOf(m, event.toolName, input);
    if (command.length > APPROVAL_LIMITS.commandChars) return { block: true, reason: m.tooLong(command.length, APPROVAL_LIMITS.commandChars) };
    const digest = argsDigest(input);
    const answer = await this.#asking.ask(s, ctx, {
      tool: event.toolName,
      toolCallId: event.toolCallId,
      input,
      action: decision.match.action,
      actionCode: decision.match.actionCode,
      reason: truncate(m.rules(decision.match.rules, decision.match.sites), APPROVAL_LIMITS.reasonChars),
      command,
      rules: decision.match.rules,
      matched: decision.match.sites,
      ...(decision.match.argv ? { argv: decision.match.argv } : {}),
      grantable: grantable(decision.match.rules, s.config.approval),
      source: "policy",
    });
    if (answer.outcome !== "approved") return { block: true, reason: m.refusal(decision.match.action, answer, s.config.approval.timeoutMs) };
    // Approved for exactly these arguments: if anything changed them while the call waited, it does not run.
    if (argsDigest(event.input) !== digest) return { block: true, reason: m.mismatch(decision.match.action) };
    return undefined;
  }

  async #executeAsk(toolCallId: string, params: AskArgs, ctx: ExtensionContext) {
    const s = this.#deps.session();
    const m = this.#deps.text().approvals;
    const respond = (answer: Answer) => ({ content: [{ type: "text" as const, text: m.askResult(answer) }], details: answer });
    if (!s?.config.approval.enabled || !present(s, ctx)) return respond({ outcome: "rejected", via: "policy", reason: m.nobodyToAsk });
    const answer = await this.#asking.ask(s, ctx, {
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
}

/** The extension's own data folder and token files, which every tool call that names them asks for. */
function ownPaths(config: ApprovalSession["config"]): string[] {
  return [dirname(config.tokenFile), config.tokenFile, dirname(config.command.journal), config.sink.tokenFile];
}

const present = (s: ApprovalSession, ctx: ExtensionContext) =>
  personPresent({ mode: ctx.mode, hasUI: ctx.hasUI, active: s.client !== undefined, subagent: s.subagent });

/** The one notice for a dialog Pi waits on: urgent like an approval, so muting never holds it. */
export function needsYouNotice(kind: string, title: string | undefined, context: NoticeContext): EventBody {
  const t = context.text;
  const known = DialogKind.safeParse(kind);
  const line = t.needsYou(title ?? null, known.success ? t.dialog[known.data] : kind);
  // What the line says, for a server that words it itself; a kind Pi adds later is told only as the summary.
  const { summary, said } = saidLine(line, { key: "needs_you", params: { kind: kind as DialogKind, ...(title ? { title } : {}) } }, context);
  return buildEvent(
    {
      eventId: `pi:${context.sessionId}:needs-you:${randomUUID()}`,
      sessionId: context.sessionId,
      runtimeId: context.runtimeId,
      source: context.source,
      task: "",
      status: "warning",
      summary,
      details: { needs_you: true, prompt: { kind, title: title ?? null }, ...(said ? { said } : {}) },
      contextUsage: context.contextUsage,
      createdAt: context.now,
    },
    context.content,
  );
}
