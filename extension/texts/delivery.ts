/** The notifier's and outbox's warnings and the notices the extension writes itself, in both languages. */
import { errorText } from "../../common/errors.ts";
import { FAILURE_WORDS } from "../../common/failure-words.ts";
import type { ProgressSeverity, ProgressStage } from "../../protocol/progress.ts";
import type { DialogKind } from "../../protocol/said.ts";
import type { DeliveryFacts } from "../server-client/decisions.ts";
import { formatsIn } from "./format.ts";

/** Why a request failed, as a person reads it: a delivery error's facts worded in one language; anything else as its own text. */
function whyIn(words: { [K in DeliveryFacts["kind"]]: (facts: Extract<DeliveryFacts, { kind: K }>) => string }) {
  return (error: unknown): string => {
    const facts = (error as { facts?: DeliveryFacts } | null)?.facts;
    return facts ? (words[facts.kind] as (facts: DeliveryFacts) => string)(facts) : errorText(error);
  };
}

const http = (f: { status: number; serverCode: string | null }) => `HTTP ${f.status}${f.serverCode ? ` ${f.serverCode}` : ""}`;

export const zhDelivery = {
  why: whyIn({
    timeout: (f) => `${f.ms} 毫秒内没有应答`,
    network: (f) => `${f.request} 连接失败（${f.code ?? f.detail}）`,
    http,
    invalid_answer: (f) => `HTTP ${f.status} 的应答格式不对（${f.where}）`,
    wrong_event: (f) => `应答说的是事件 ${f.named}，不是发出的 ${f.sent}`,
    batch_mismatch: () => "批量应答与发出的事件对不上",
    receipt_failed: () => "服务端的回执为 failed",
    aborted: () => "已中止",
    internal: (f) => `内部错误：${f.detail}`,
  }),
  internalError: (why: string) => `通知发送出现内部错误：${why}`,
  finalNotWritten: (eventId: string, dir: string, why: string) => `最终通知 ${eventId} 无法写入 outbox（${dir}）：${why}`,
  finalKept: (eventId: string, attempts: number, why: string) =>
    `最终通知 ${eventId} 未送达（${attempts} 次尝试）：${why}；已保留在 outbox，服务端恢复后重发。`,
  finalLost: (eventId: string, attempts: number, why: string) => `最终通知 ${eventId} 未送达（${attempts} 次尝试）：${why}；outbox 不可用，这条通知已丢失。`,
  expired: (count: number, ids: string) => `outbox 中 ${count} 条最终通知超过保留期仍未送达，已删除：${ids}`,
  noticeFailed: (eventId: string, status: string, attempts: number, why: string) => `通知 ${eventId}（${status}）未送达（${attempts} 次尝试）：${why}`,
  invalidEvent: (why: string) => `通知事件无效，未发送：${why}`,
  outboxCorrupt: (file: string, why: string) => `outbox 文件 ${file} 无法读取，已改名为 .bad 保留：${why}`,
  resent: (count: number) => `已补发服务端中断期间暂存的 ${count} 条通知。`,
  paced: "服务端正在限速这个会话的通知（HTTP 429）：通知会按服务端给的间隔自动重发，期间个别进度通知可能被跳过；最终通知不会丢失。",
};

export const enDelivery: typeof zhDelivery = {
  why: whyIn({
    timeout: (f) => `no answer within ${f.ms} ms`,
    network: (f) => `${f.request} failed (${f.code ?? f.detail})`,
    http,
    invalid_answer: (f) => `HTTP ${f.status} with an answer of the wrong shape (${f.where})`,
    wrong_event: (f) => `the answer names event ${f.named}, not ${f.sent}`,
    batch_mismatch: () => "the batch answer does not match the events sent",
    receipt_failed: () => "the server's receipt says failed",
    aborted: () => "aborted",
    internal: (f) => `internal error: ${f.detail}`,
  }),
  internalError: (why) => `Internal error while sending a notice: ${why}`,
  finalNotWritten: (eventId, dir, why) => `Final notice ${eventId} could not be written to the outbox (${dir}): ${why}`,
  finalKept: (eventId, attempts, why) =>
    `Final notice ${eventId} not delivered (${attempts} attempts): ${why}; kept in the outbox and sent again once the server is back.`,
  finalLost: (eventId, attempts, why) =>
    `Final notice ${eventId} not delivered (${attempts} attempts): ${why}; the outbox is unavailable, so this notice is lost.`,
  expired: (count, ids) => `${count} final notices in the outbox outlived their retention undelivered and were deleted: ${ids}`,
  noticeFailed: (eventId, status, attempts, why) => `Notice ${eventId} (${status}) not delivered (${attempts} attempts): ${why}`,
  invalidEvent: (why) => `Invalid notice event, not sent: ${why}`,
  outboxCorrupt: (file, why) => `Outbox file ${file} is unreadable and was renamed to .bad: ${why}`,
  resent: (count) => `Sent ${count} ${count === 1 ? "notice" : "notices"} held while the server was unreachable.`,
  paced:
    "The server is pacing this session's notices (HTTP 429): they are sent again at the pace it asks for, and some progress notices may be skipped meanwhile; final notices are never lost.",
};

export const zhNotice = {
  inProject: (project: string, body: string) => `项目 ${project}：${body}`,
  completed: "任务已完成。",
  failure: FAILURE_WORDS["zh-CN"],
  failed: (why: string, detail: string | null) => (detail ? `${why}：${detail}` : `${why}。`),
  started: "开始处理任务。",
  minutes: formatsIn("zh-CN").minutes,
  progress: (elapsed: string, toolCalls: number) => `仍在运行：已用 ${elapsed}，已完成 ${toolCalls} 次工具调用。`,
  toolError: (tool: string, detail: string | null) => `工具 ${tool} 出错${detail ? `：${detail}` : "。"}`,
  stage: {
    started: "开始",
    progress: "进展",
    blocked: "受阻",
    awaiting_approval: "等待你确认",
    done: "阶段完成",
    failed: "失败",
  } satisfies Record<ProgressStage, string>,
  severity: { info: "", warn: "【注意】", critical: "【紧急】" } satisfies Record<ProgressSeverity, string>,
  /** A report_progress call as the persona reads it: mark, stage, the agent's sentence, its detail. */
  report: (mark: string, stage: string, summary: string, detail: string | null) => `${mark}${stage}：${summary}${detail ? `\n详情：${detail}` : ""}`,
  reportNotAudited: (why: string) => `被拒绝的进度汇报未能写入服务端审计：${why}`,
  /** An instruction the session took in but the user's interrupt left unanswered. */
  interrupted: {
    task: "Anon 指令未得到回复",
    summary: (preview: string) => `指令已进入 Pi 会话，但用户中断了这次运行，Agent 尚未回复。指令内容：${preview}`,
  },
  /** A dialog Pi waits on (another extension's), by its title or else its kind. */
  needsYou: (title: string | null, kind: string) => `需要你：Pi 正在等你在终端回答${title ? `「${title}」` : `一个${kind}对话框`}，回答之前 Agent 不会继续。`,
  /** A dialog's kind (Pi's `ui_prompt_start`), as `needsYou` names an untitled one. */
  dialog: { select: "选择", confirm: "确认", input: "输入", editor: "编辑", custom: "自定义" } satisfies Record<DialogKind, string>,
  /** Why report_progress sent nothing, as the model reads it. */
  refusal: {
    subagent: "子 Agent 不能向用户汇报进度。",
    inactive: "当前会话没有开启 Anon 通知，进度汇报未发送。",
    invalid: (problem: string) => `参数无效：${problem}`,
    arguments: "（参数）",
    shape: "不符合参数结构",
    artifact: "artifact 必须是 http(s) 链接",
    rateLimited: (perMinute: number, seconds: number) => `已达到每分钟 ${perMinute} 条的上限，本条未发送；约 ${seconds} 秒后才能再汇报，只在关键节点汇报。`,
    duplicate: "上一条已是 progress，同一阶段不重复汇报；等阶段完成、失败或需要用户决定时再汇报。",
  },
};

export const enNotice: typeof zhNotice = {
  inProject: (project, body) => `Project ${project}: ${body}`,
  completed: "Task completed.",
  failure: FAILURE_WORDS["en-US"],
  failed: (why, detail) => `Failed: ${why}${detail ? `: ${detail}` : "."}`,
  started: "Started working on the task.",
  minutes: formatsIn("en-US").minutes,
  progress: (elapsed, toolCalls) => `Still running: ${elapsed} so far, ${toolCalls} tool calls done.`,
  toolError: (tool, detail) => `Tool ${tool} failed${detail ? `: ${detail}` : "."}`,
  stage: { started: "Started", progress: "Progress", blocked: "Blocked", awaiting_approval: "Waiting for you", done: "Stage done", failed: "Failed" },
  severity: { info: "", warn: "[Attention] ", critical: "[Urgent] " },
  report: (mark, stage, summary, detail) => `${mark}${stage}: ${summary}${detail ? `\nDetails: ${detail}` : ""}`,
  interrupted: {
    task: "Anon's instruction got no answer",
    summary: (preview) => `The instruction reached the Pi session, but the user interrupted the run before the agent answered. The instruction: ${preview}`,
  },
  dialog: { select: "select", confirm: "confirm", input: "input", editor: "editor", custom: "custom" },
  needsYou: (title, kind) =>
    `Needs you: Pi is waiting for your answer to ${title ? `"${title}"` : `a ${kind} dialog`} in the terminal; the agent will not go on until you answer.`,
  reportNotAudited: (why) => `A refused progress report could not be written to the server's audit trail: ${why}`,
  refusal: {
    subagent: "A subagent cannot report progress to the user.",
    inactive: "Anon notices are not switched on for this session; the progress report was not sent.",
    invalid: (problem) => `Invalid arguments: ${problem}`,
    arguments: "(arguments)",
    shape: "does not match the parameters",
    artifact: "artifact must be an http(s) link",
    rateLimited: (perMinute, seconds) =>
      `The limit of ${perMinute} reports a minute is reached; this one was not sent. Report again in about ${seconds} s, and only at key moments.`,
    duplicate:
      "The last report was already a progress report; the same stage is not reported twice. Report again when the stage is done, fails or needs the user.",
  },
};
