/**
 * The texts an approval sends: the request straight to the owner, its closing message, and the
 * mention to the persona. Pure. Agent-written parts (preview, reason, action) are redacted again
 * here and only ever sent as plain text.
 */
import { basename } from "node:path";
import { redactSecrets } from "../../common/redact.ts";
import type { EventBody } from "../../protocol/events.ts";
import type { ApprovalRecord } from "./decisions.ts";

const VIA: Record<string, string> = {
  chat: "在聊天中",
  operator: "通过运维接口",
  console: "在控制台",
  terminal: "在终端",
  policy: "按策略",
  timeout: "",
  aborted: "",
};

function minutesLeft(record: ApprovalRecord, now: Date): number {
  return Math.max(1, Math.round((record.expires_at.getTime() - now.getTime()) / 60_000));
}

/** The request the owner answers: code, what the call is, why, and how to answer. */
export function requestText(record: ApprovalRecord, now: Date): string {
  const what = record.source === "ask_approval" ? `Agent 请求批准：${redactSecrets(record.action)}` : `Agent 想执行 ${record.tool}（${record.action}）`;
  const lines = [
    `【Pi 审批 ${record.code}】项目 ${basename(record.cwd) || record.cwd}`,
    what,
    redactSecrets(record.preview),
  ];
  if (record.reason) lines.push(`理由：${redactSecrets(record.reason)}`);
  lines.push(
    `${minutesLeft(record, now)} 分钟内不回答即拒绝。`,
    `批准：anon.approve ${record.code}，或回复本消息“同意”`,
    `拒绝：anon.deny ${record.code} [理由]，或回复本消息“拒绝”`,
    `(approval ${record.code}: reply yes / no)`,
  );
  return lines.join("\n");
}

/** The one message that closes a request, so no stale request is left looking open. */
export function closingText(record: ApprovalRecord): string {
  const head = `【Pi 审批 ${record.code} 已结束】${redactSecrets(record.action)}：`;
  const via = record.via ? (VIA[record.via] ?? "") : "";
  const why = record.outcome_reason ?? record.decision_reason;
  const reason = why ? `（${redactSecrets(why)}）` : "";
  switch (record.state) {
    case "approved":
      return `${head}已${via}批准，命令已放行。${record.via === "terminal" ? "终端先回答了，聊天中无需再回答。" : ""}`;
    case "rejected":
      if (record.via === "aborted") return `${head}运行被中断，审批已取消。`;
      return `${head}已${via}拒绝${reason}。${record.via === "terminal" ? "终端先回答了，聊天中无需再回答。" : ""}`;
    case "timeout":
      return `${head}超时无人回答，已按拒绝处理。`;
    case "vanished":
      return `${head}会话已离线，请求作废。`;
    default:
      return `${head}${record.state}`;
  }
}

/** The persona hears of the request too, but only the owner can answer it. */
export function mentionEvent(record: ApprovalRecord, now: Date): EventBody {
  return {
    event_id: `approval:${record.approval_id}:request`,
    session_id: record.session_id,
    runtime_id: record.runtime_id,
    source: `Pi Agent · ${basename(record.cwd) || "project"}`.slice(0, 120),
    task: "",
    status: "warning",
    summary: `主人已直接收到审批请求 ${record.code}：${redactSecrets(record.action)}。只有主人能批准或拒绝（anon.approve / anon.deny），你不能替主人决定。`.slice(0, 1200),
    details: { approval: { approval_id: record.approval_id, code: record.code, tool: record.tool, state: record.state } },
    url: null,
    context_usage: null,
    created_at: now.toISOString(),
    delivery: "anon",
  };
}
