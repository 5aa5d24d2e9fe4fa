/**
 * The persona's six tools (`agent_command`, `agent_sessions`, `agent_session_message`,
 * `agent_commands`, `agent_command_cancel`, `agent_approvals`) registered with YesImBot v3's tool service
 * (`yesimbot.tool`: `registerTool(definition)` / `unregisterTool(name)`). A thin adapter over the
 * operator service: it only exists while YesImBot does, and offers the tools only in the
 * configured owner's private chat, never in a group. YesImBot 3.0.3 checks `isSupported` when a
 * tool is called but lists every registered tool in every chat's prompt (its context builder asks
 * the tool service without a session), so the adapter also takes its tools out of the list
 * the model is shown in any other chat.
 *
 * Request keys have the form `runtime_id:turn_id:tool_call_id`. YesImBot v3 calls a
 * tool as `execute({ session, ...params })` and passes neither a turn id nor a tool-call id, so:
 * - runtime_id: random per start of this adapter (a YesImBot or plugin reload starts a new one);
 * - turn_id: random per Koishi `Session` object, which YesImBot v3 keeps for a whole stimulus turn
 *   and passes to every action of it;
 * - tool_call_id: a digest of the tool name and its validated parameters, which is what YesImBot's
 *   own retry of the same call repeats.
 * So a retried call in the same turn maps to the same key and never creates a second command.
 */
import { createHash, randomUUID } from "node:crypto";
import type { Context, Schema as SchemaType, Session } from "koishi";
import { z } from "zod";
import { ApprovalListQuery } from "../../protocol/approvals.ts";
import { ImageMime } from "../../protocol/commands.ts";
import { OperatorCreateCommand, OperatorListQuery, OperatorSessionsQuery } from "../../protocol/operator.ts";
import { formatIssues, Id, LIMITS, type ErrorCode } from "../../protocol/wire.ts";
import { auditedTool } from "./persona-tools.ts";
import type { AuditLog } from "../audit/store.ts";
import { DomainError } from "../errors.ts";
import { koishi } from "../koishi.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { OperatorService } from "../operator/service.ts";
import type { ToolCallResult, ToolDefinition } from "./yesimbot-tool-service.ts";

const { Schema } = koishi;

/** Who may use the tools: the configured recipient, in a private chat with the configured bot. */
export interface OwnerScope {
  recipientId: string;
  /** `platform:selfId`; the platform half makes the owner a platform + user id pair. Empty: no owner. */
  botId: string;
}

/**
 * A user id means something only on its platform: without a configured bot there is no platform,
 * and the same id on any other platform would pass, so nobody is the owner.
 */
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
  agent_sessions: OperatorSessionsQuery.extend({ limit: OperatorSessionsQuery.shape.limit.unwrap().max(AGENT_SESSIONS_PAGE_MAX).default(AGENT_SESSIONS_PAGE_DEFAULT) }),
  agent_session_message: z.strictObject({ session_id: Id, content: Instruction, images: ImagesParam }),
  agent_commands: OperatorListQuery,
  agent_command_cancel: z.strictObject({ session_id: Id, command_id: Id }),
  // Listing only: approvals are decided by the owner, never by the persona.
  agent_approvals: ApprovalListQuery,
};
type ToolName = keyof typeof ToolArgs;

/** What the model reads when a call is refused, by protocol error code. */
const REFUSALS: Partial<Record<ErrorCode, string>> = {
  not_found: "找不到对应的记录（事件、会话或指令 ID 不存在，或不属于该 session）。",
  event_session_mismatch: "该通知事件不属于这个 session。",
  session_offline: "该 session 当前不在线（heartbeat 已过期、未开启或未知），内容没有入队。",
  images_not_supported: "该 session 的 Pi 客户端不支持图片指令。",
  delivery_started: "该指令已经开始交付，不能撤回。",
  already_accepted: "Pi 已经接收该指令，不能撤回。",
  idempotency_key_reused: "同一次工具调用的内容发生了变化，已拒绝。",
  image_budget_exceeded: "服务端待发图片总量已满，请稍后再试或不带图片发送。",
  invalid_image: "图片无效：需要不带 data: 前缀的 base64，PNG/JPEG/GIF/WebP，单张不超过 4 MiB、合计不超过 8 MiB。",
  invalid_request: "参数不符合要求。",
  not_ready: "服务端暂时不可用，请稍后重试。",
};

function imagesSchema() {
  // YesImBot's prompt shows only top-level parameters, so the item shape is spelled out here too.
  return Schema.array(
    Schema.object({
      data: Schema.string().required().description("不带 data: 前缀的 base64 图片内容"),
      mime_type: Schema.union(ImageMime.options).required().description("图片类型"),
    }),
  ).description(`可选图片，最多 ${LIMITS.imagesPerCommand} 张；每项为 {"data": 不带 data: 前缀的 base64, "mime_type": ${ImageMime.options.map((m) => `"${m}"`).join(" | ")}}`);
}

const DESCRIPTIONS: Record<ToolName, { description: string; parameters: () => SchemaType }> = {
  agent_command: {
    description:
      "根据一条已收到的 Pi Agent 通知，向产生该通知的 session 发送一条明确指令（进入指令队列，在 Pi 的安全边界以 steer 交付）。返回“已入队”只表示进入队列，不表示 Agent 已完成。",
    parameters: () =>
      Schema.object({
        event_id: Schema.string().required().description("通知事件的精确 ID"),
        session_id: Schema.string().required().description("产生该通知的 Pi Agent session ID"),
        instruction: Schema.string().required().description(`给 Agent 的指令，最多 ${LIMITS.instructionChars} 字`),
        images: imagesSchema(),
      }),
  },
  agent_sessions: {
    description: `列出当前在线（heartbeat 有效）的 Pi Agent session：ID、项目名、模型、idle/running、是否支持图片、最近活动与最近心跳时间。最近心跳的在前，每次最多 ${AGENT_SESSIONS_PAGE_MAX} 个；返回的 next_cursor 不为空时，把它作为 cursor 再调用一次可以看到更多。`,
    parameters: () =>
      Schema.object({
        limit: Schema.natural().max(AGENT_SESSIONS_PAGE_MAX).description(`最多返回个数（1-${AGENT_SESSIONS_PAGE_MAX}，默认 ${AGENT_SESSIONS_PAGE_DEFAULT}）`),
        cursor: Schema.string().description("上一次结果中的 next_cursor，用于查看更多"),
      }),
  },
  agent_session_message: {
    description: "向一个在线的 Pi Agent session 主动投递内容。离线、过期或未知的 session 会被直接拒绝，不会排队等待。",
    parameters: () =>
      Schema.object({
        session_id: Schema.string().required().description("在线 session 的 ID（来自 agent_sessions）"),
        content: Schema.string().required().description(`要投递的内容，最多 ${LIMITS.instructionChars} 字`),
        images: imagesSchema(),
      }),
  },
  agent_commands: {
    description: "查询某个 session 的指令：ID、来源、状态、是否可撤回、时间和内容预览（最新在前）。",
    parameters: () =>
      Schema.object({
        session_id: Schema.string().required().description("session ID"),
        limit: Schema.natural().max(LIMITS.commandListMax).description(`最多返回条数（1-${LIMITS.commandListMax}）`),
      }),
  },
  agent_command_cancel: {
    description: "撤回一条尚未开始交付的指令。已开始交付或 Pi 已接收的指令不能撤回；重复撤回无副作用。",
    parameters: () =>
      Schema.object({
        session_id: Schema.string().required().description("session ID"),
        command_id: Schema.string().required().description("要撤回的指令 ID"),
      }),
  },
  agent_approvals: {
    description:
      "查看 Pi Agent 的审批请求（默认只看未结束的）：审批码、工具、操作、理由、状态与谁决定的。只能查看：审批只能由主人本人用 anon.approve / anon.deny 回答，你不能替主人批准或拒绝。",
    parameters: () =>
      Schema.object({
        state: Schema.union(["open", "all"]).description("open：未结束的（默认）；all：全部"),
        session_id: Schema.string().description("只看这个 session"),
        limit: Schema.natural().max(100).description("最多返回条数（1-100）"),
      }),
  },
};

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
      const definitions = toolDefinitions(deps, randomUUID()).map((definition) => (deps.audit ? auditedTool(definition, deps.audit) : definition));
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

/** The part of YesImBot 3.0.3's (TypeScript-private) prompt context builder the list filter wraps. */
interface ContextBuilderLike {
  build(stimulus: { session?: Session }): Promise<{ toolSchemas?: { name: string }[] }>;
}

/**
 * Wraps the agent's context builder so that a turn outside the owner's private chat is not shown
 * these tools. Duck-typed: without that builder the tools stay listed and are refused when called.
 */
function hideOutsideOwnerChat(ctx: Context, owner: OwnerScope, names: Set<string>): void {
  const builder = (ctx["yesimbot.agent"] as { contextBuilder?: Partial<ContextBuilderLike> }).contextBuilder;
  const original = builder?.build;
  if (!builder || typeof original !== "function") return;
  const filtered: ContextBuilderLike["build"] = async function (this: unknown, stimulus) {
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

export function toolDefinitions({ operator, approvals, owner }: PersonaToolsDeps, runtimeId: string): ToolDefinition[] {
  const turns = new WeakMap<Session, string>();
  const requestKey = (session: Session, name: ToolName, args: unknown) => {
    let turn = turns.get(session);
    if (!turn) turns.set(session, (turn = randomUUID()));
    const call = createHash("sha256").update(name).update("\0").update(JSON.stringify(args)).digest("hex").slice(0, 32);
    return `persona:${runtimeId}:${turn}:${call}`;
  };

  const run: { [K in ToolName]: (args: z.output<(typeof ToolArgs)[K]>, session: Session) => Promise<unknown> } = {
    agent_command: (args, session) =>
      operator.createCommand({ ...args, request_key: requestKey(session, "agent_command", args), origin: "anon" }),
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
    description: DESCRIPTIONS[name].description,
    parameters: DESCRIPTIONS[name].parameters(),
    isSupported: (session) => isOwnerChat(owner, session),
    execute: async ({ session, ...params }) => {
      // YesImBot skips isSupported when a call comes without a session, so check again here.
      if (!session || !isOwnerChat(owner, session)) return refusal("forbidden", "这些工具只在已配置主人的私聊中可用。");
      const parsed = ToolArgs[name].safeParse(withoutYesImBotExtras(params));
      if (!parsed.success) {
        return refusal("invalid_request", `${REFUSALS.invalid_request} ${formatIssues(parsed.error)}`);
      }
      try {
        return { status: "success", result: await (run[name] as (a: unknown, s: Session) => Promise<unknown>)(parsed.data, session) };
      } catch (error) {
        if (error instanceof DomainError) {
          const detail = error.issues?.map((i) => `${i.path}: ${i.message}`).join("; ");
          return refusal(error.code, [REFUSALS[error.code] ?? error.code, detail].filter(Boolean).join(" "), error.code === "not_ready");
        }
        throw error;
      }
    },
  }));
}

/**
 * YesImBot 3.0.3 keeps only a call's status and `result` in the history its model reads (the
 * `error` object is dropped), so the reason is carried in `result` as well.
 */
function refusal(name: string, message: string, retryable = false): ToolCallResult {
  return { status: "error", result: { error: name, message }, error: { name, message, retryable } };
}

/**
 * Schemastery fills absent optional keys with `undefined`; the strict schemas treat those as absent.
 * YesImBot's prompt asks the model to put an `inner_thoughts` string into every action's params
 * (and Schemastery keeps unknown keys), so that one is dropped rather than refused.
 */
function withoutYesImBotExtras(params: Record<string, unknown>): Record<string, unknown> {
  return Object.fromEntries(Object.entries(params).filter(([key, value]) => value !== undefined && key !== "inner_thoughts"));
}
