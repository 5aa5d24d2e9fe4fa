/**
 * What the model, the terminal and the server read about an approval, in one place. Pure. The
 * model reads the tool result, so every refusal says what happened and what to do next.
 */
import type { ApprovalVia } from "../../protocol/approvals.ts";
import type { Answer } from "./waits.ts";

const VIA_TEXT: Record<ApprovalVia, string> = {
  chat: "在聊天中",
  operator: "通过运维接口",
  console: "在控制台",
  terminal: "在终端",
  policy: "按策略",
  timeout: "超时",
  aborted: "因运行中断",
};

export function viaText(via: ApprovalVia): string {
  return VIA_TEXT[via];
}

/** The blocked tool call's reason, which the model reads as the tool result. */
export function refusalText(action: string, answer: Answer, timeoutMs: number): string {
  if (answer.outcome === "timeout") {
    return `「${action}」等待批准超时（${Math.round(timeoutMs / 1000)} 秒内无人回答），已按拒绝处理；不要重试，向用户说明需要批准后再继续。(approval timed out: rejected)`;
  }
  if (answer.via === "aborted") return `「${action}」的审批因运行被中断而取消，未执行。(approval cancelled: run aborted)`;
  const why = answer.reason ? `，理由：${answer.reason}` : "";
  return `用户${viaText(answer.via)}拒绝了「${action}」${why}。不要重试同一操作，等待用户的进一步指示。(rejected by the user)`;
}

/** ask_approval's result for the model: the outcome word first, then who and why. */
export function askResultText(answer: Answer): string {
  const why = answer.reason ? `：${answer.reason}` : "";
  if (answer.outcome === "approved") return `approved — 用户${viaText(answer.via)}批准了${why}。可以继续执行。`;
  if (answer.outcome === "timeout") return "timeout — 等待批准超时，无人回答，按拒绝处理；不要执行该操作。";
  return `rejected — ${answer.via === "aborted" || answer.via === "policy" ? viaText(answer.via) : `用户${viaText(answer.via)}`}拒绝${why}。不要执行该操作。`;
}

/** The terminal dialog. */
export function dialogTitle(action: string): string {
  return `需要批准 (approval needed)：${action}`;
}

export function dialogMessage(preview: string, reason: string, timeoutMs: number, remote: boolean): string {
  const lines = [preview];
  if (reason) lines.push(`理由：${reason}`);
  lines.push(`${Math.round(timeoutMs / 60_000) || 1} 分钟内无人回答则拒绝。${remote ? "也可以在聊天中回答，先到的答案为准。" : ""}`);
  return lines.join("\n");
}

/** Told in the terminal when the other side answered first. */
export function answeredElsewhereText(action: string, answer: Answer): string {
  const verdict = answer.outcome === "approved" ? "批准" : answer.outcome === "timeout" ? "超时拒绝" : "拒绝";
  return `「${action}」已${answer.outcome === "timeout" ? "" : viaText(answer.via)}${verdict}，终端对话框已关闭。`;
}
