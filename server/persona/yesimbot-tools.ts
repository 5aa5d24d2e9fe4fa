/** The persona's six tools on YesImBot v3's tool service, a thin adapter over the operator service, offered only in the owner's
 * private chat and audited (inputs, images as digests, outcome). Request keys are derived so a retried call in one turn repeats its key. */
import { createHash, randomUUID } from "node:crypto";
import type { Context, Schema as SchemaType, Session } from "koishi";
import { z } from "zod";
import { ApprovalListQuery } from "../../protocol/approvals.ts";
import { ImageMime } from "../../protocol/queue.ts";
import { OperatorCreateCommand, OperatorListQuery, OperatorSessionsQuery } from "../../protocol/operator.ts";
import { formatIssues, Id, LIMITS } from "../../protocol/wire.ts";
import type { AuditLog } from "../audit/store.ts";
import { DomainError } from "../../common/domain-error.ts";
import { errorText } from "../../common/errors.ts";
import { koishi } from "../koishi.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { OperatorService } from "../operator/service.ts";
import type { ToolCallResult, ToolDefinition } from "./yesimbot-tool-service.ts";
import { instanceSay, type Say } from "../locales/load.ts";

const { Schema } = koishi;

/** Who may use the tools: the configured recipient, in a private chat with the configured bot (`platform:selfId`; the platform half makes the
 * owner a platform + user id pair; empty: no owner). */
export type OwnerScope = { recipientId: string; botId: string };

/** A user id means something only on its platform: without a configured bot nobody is the owner. */
export function isOwnerChat(owner: OwnerScope, session: Session | undefined): boolean {
  if (!session || !owner.recipientId || !owner.botId || !session.isDirect) return false;
  return session.sid === owner.botId && session.userId === owner.recipientId;
}

/** A page the model reads: small, with the cursor for more. */
const AGENT_SESSIONS_PAGE_DEFAULT = 20;
const AGENT_SESSIONS_PAGE_MAX = 50;
const ImagesParam = OperatorCreateCommand.shape.images;
const Instruction = OperatorCreateCommand.shape.instruction;
const ToolArgs = {
  agent_command: z.strictObject({ event_id: Id, session_id: Id, instruction: Instruction, images: ImagesParam }),
  agent_sessions: OperatorSessionsQuery.extend({
    limit: OperatorSessionsQuery.shape.limit.unwrap().max(AGENT_SESSIONS_PAGE_MAX).default(AGENT_SESSIONS_PAGE_DEFAULT),
  }),
  agent_session_message: z.strictObject({ session_id: Id, content: Instruction, images: ImagesParam }),
  agent_commands: OperatorListQuery,
  agent_command_cancel: z.strictObject({ session_id: Id, command_id: Id }),
  // Listing only: approvals are decided by the owner, never by the persona.
  agent_approvals: ApprovalListQuery,
};
type ToolName = keyof typeof ToolArgs;

/** Refusal codes the model is told in words (`anon-notify.persona-tools.refusals.<code>`); others by their code. */
const WORDED_REFUSALS = new Set(
  "not_found event_session_mismatch session_offline images_not_supported delivery_started already_accepted idempotency_key_reused image_budget_exceeded invalid_image invalid_request not_ready forbidden".split(
    " ",
  ),
);
function refusalText(say: Say, code: string): string {
  return WORDED_REFUSALS.has(code) ? say(`anon-notify.persona-tools.refusals.${code}`) : code;
}

/** The tools' parameters for the model, in the instance's language (the persona's). */
function parameters(say: Say): Record<ToolName, Record<string, SchemaType>> {
  const t = (key: string, params: object = {}) => say(`anon-notify.persona-tools.${key}`, params);
  const required = (description: string) => Schema.string().required().description(description);
  const limit = (max: number, description: string) => Schema.natural().max(max).description(description);
  const imagesSchema = () =>
    // YesImBot's prompt shows only top-level parameters, so the item shape is spelled out here too.
    Schema.array(
      Schema.object({
        data: required(t("image-data")),
        mime_type: Schema.union(ImageMime.options).required().description(t("image-type")),
      }),
    ).description(
      t("images", { max: LIMITS.imagesPerCommand, shape: `{"data": ${t("image-data")}, "mime_type": ${ImageMime.options.map((m) => `"${m}"`).join(" | ")}}` }),
    );
  return {
    agent_command: {
      event_id: required(t("agent_command.event_id")),
      session_id: required(t("agent_command.session_id")),
      instruction: required(t("instruction", { max: LIMITS.instructionChars })),
      images: imagesSchema(),
    },
    agent_sessions: {
      limit: limit(AGENT_SESSIONS_PAGE_MAX, t("agent_sessions.limit", { max: AGENT_SESSIONS_PAGE_MAX, default: AGENT_SESSIONS_PAGE_DEFAULT })),
      cursor: Schema.string().description(t("agent_sessions.cursor")),
    },
    agent_session_message: {
      session_id: required(t("agent_session_message.session_id")),
      content: required(t("agent_session_message.content", { max: LIMITS.instructionChars })),
      images: imagesSchema(),
    },
    agent_commands: { session_id: required("session ID"), limit: limit(LIMITS.commandListMax, t("limit", { max: LIMITS.commandListMax })) },
    agent_command_cancel: { session_id: required("session ID"), command_id: required(t("agent_command_cancel.command_id")) },
    agent_approvals: {
      state: Schema.union(["open", "all"]).description(t("agent_approvals.state")),
      session_id: Schema.string().description(t("agent_approvals.session_id")),
      limit: limit(100, t("limit", { max: 100 })),
    },
  };
}

export interface PersonaToolsDeps {
  operator: OperatorService;
  approvals: Pick<ApprovalService, "list">;
  owner: OwnerScope;
  /** Records every call, refused or not, with its inputs (images as digests). */
  audit?: AuditLog;
}

/** Registers the tools whenever YesImBot v3's tool service is present, and removes them with it. */
export const PersonaTools = {
  name: "notify-webhook-persona-tools",
  reusable: true,
  apply(ctx: Context, deps: PersonaToolsDeps) {
    ctx.inject(["yesimbot.tool"], (scope) => {
      const definitions = toolDefinitions(deps, randomUUID(), instanceSay(scope)).map((definition) =>
        deps.audit ? auditedTool(definition, deps.audit) : definition,
      );
      const service = scope["yesimbot.tool"];
      for (const definition of definitions) service.registerTool(definition);
      // YesImBot v3 does not remove tools registered with registerTool() on its own.
      scope.on("dispose", () => {
        for (const definition of definitions) service.unregisterTool(definition.name);
      });
      scope.inject(["yesimbot.agent"], (agentScope) => hideOutsideOwnerChat(agentScope, deps.owner, new Set(definitions.map((d) => d.name))));
    });
  },
};

/** The method of YesImBot 3.0.3's (TypeScript-private) prompt context builder the list filter wraps. */
type Build = (stimulus: { session?: Session }) => Promise<{ toolSchemas?: { name: string }[] }>;

/** Hides these tools from turns outside the owner's private chat; duck-typed: without that builder the tools stay listed and are refused when called. */
function hideOutsideOwnerChat(ctx: Context, owner: OwnerScope, names: Set<string>): void {
  const builder = (ctx["yesimbot.agent"] as { contextBuilder?: { build?: Build } }).contextBuilder;
  const original = builder?.build;
  if (!builder || typeof original !== "function") return;
  const filtered: Build = async function (this: unknown, stimulus) {
    const context = await original.call(this, stimulus);
    if (Array.isArray(context?.toolSchemas) && !isOwnerChat(owner, stimulus?.session)) {
      context.toolSchemas = context.toolSchemas.filter((tool) => !names.has(tool.name));
    }
    return context;
  };
  builder.build = filtered;
  ctx.on("dispose", () => {
    if (builder.build === filtered) builder.build = original;
  });
}

export function toolDefinitions({ operator, approvals, owner }: PersonaToolsDeps, runtimeId: string, say: Say): ToolDefinition[] {
  const texts = parameters(say);
  const turns = new WeakMap<Session, string>();
  /** YesImBot v3 passes no turn or tool-call id: the turn is a random id per Koishi `Session` (kept for a whole stimulus turn), the
   * call a digest of its name and validated parameters, so YesImBot's retry of the same call repeats the key. */
  const requestKey = (session: Session, name: ToolName, args: unknown) => {
    let turn = turns.get(session);
    if (!turn) turns.set(session, (turn = randomUUID()));
    const call = createHash("sha256").update(name).update("\0").update(JSON.stringify(args)).digest("hex").slice(0, 32);
    return `persona:${runtimeId}:${turn}:${call}`;
  };

  const run: { [K in ToolName]: (args: z.output<(typeof ToolArgs)[K]>, session: Session) => Promise<unknown> } = {
    agent_command: (args, session) => operator.createCommand({ ...args, request_key: requestKey(session, "agent_command", args), origin: "anon" }),
    agent_sessions: async (args) => operator.sessions(args),
    agent_session_message: (args, session) =>
      operator.createCommand({
        session_id: args.session_id,
        instruction: args.content,
        images: args.images,
        request_key: requestKey(session, "agent_session_message", args),
        origin: "proactive",
      }),
    agent_commands: async (args) => ({ commands: await operator.commands(args.session_id, args.limit) }),
    agent_command_cancel: async (args) => ({ command: await operator.cancel(args.session_id, args.command_id) }),
    agent_approvals: async (args) => ({ approvals: await approvals.list(args) }),
  };

  const names = Object.keys(ToolArgs) as ToolName[];
  return names.map((name) => ({
    name,
    // Only agent_sessions' description names a number (its page's largest).
    description: say(`anon-notify.persona-tools.${name}.description`, { max: AGENT_SESSIONS_PAGE_MAX }),
    parameters: Schema.object(texts[name]),
    isSupported: (session) => isOwnerChat(owner, session),
    execute: async ({ session, ...params }) => {
      // YesImBot skips isSupported when a call comes without a session, so check again here.
      if (!session || !isOwnerChat(owner, session)) return refusal("forbidden", refusalText(say, "forbidden"));
      const parsed = ToolArgs[name].safeParse(withoutYesImBotExtras(params));
      if (!parsed.success) {
        return refusal("invalid_request", `${refusalText(say, "invalid_request")} ${formatIssues(parsed.error)}`);
      }
      try {
        return { status: "success", result: await (run[name] as (a: unknown, s: Session) => Promise<unknown>)(parsed.data, session) };
      } catch (error) {
        if (error instanceof DomainError) {
          const detail = error.issues?.map((i) => `${i.path}: ${i.message}`).join("; ");
          return refusal(error.code, [refusalText(say, error.code), detail].filter(Boolean).join(" "), error.code === "not_ready");
        }
        throw error;
      }
    },
  }));
}

/** YesImBot 3.0.3 keeps only a call's status and `result` in the model's history, so the reason is carried in `result` too. */
function refusal(name: string, message: string, retryable = false): ToolCallResult {
  return { status: "error", result: { error: name, message }, error: { name, message, retryable } };
}

/** Schemastery fills absent optional keys with `undefined` (treated as absent); YesImBot asks for `inner_thoughts` in every action's params, so it is
 * dropped. */
function withoutYesImBotExtras(params: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([key, value]) => value !== undefined && key !== "inner_thoughts"));
}

/** A persona tool that records each call and runs as the `persona`. */
function auditedTool(definition: ToolDefinition, audit: AuditLog): ToolDefinition {
  return {
    ...definition,
    execute: async (args) => {
      let outcome: { status: string; error: unknown } = { status: "exception", error: null };
      try {
        const result = await audit.as("persona", () => definition.execute(args));
        outcome = { status: result.status, error: result.error ?? null };
        return result;
      } catch (error) {
        outcome.error = errorText(error);
        throw error;
      } finally {
        const { session, ...input } = args;
        const sessionId = typeof input.session_id === "string" && Id.safeParse(input.session_id).success ? input.session_id : null;
        await audit.record({
          actor: "persona",
          action: `persona.${definition.name}`,
          session_id: sessionId,
          subject: typeof input.command_id === "string" ? input.command_id : typeof input.event_id === "string" ? input.event_id : null,
          data: {
            input,
            chat: session ? { user_id: session.userId ?? null, channel_id: session.channelId ?? null, direct: session.isDirect } : null,
            ...outcome,
          },
        });
      }
    },
  };
}
