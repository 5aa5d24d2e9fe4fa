/**
 * `/anon-notify`: the bare command switches the current session's notices on or off. Switching on
 * is refused with its reason for subagents, a bad or disabled configuration and a missing
 * recipient, and asks the server whether the recipient can be reached (enableVerdict decides).
 * The record is written to the session before memory changes.
 */
import { join } from "node:path";
import type { ExtensionAPI } from "@mariozechner/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { ACTIVATION_VERSION, USAGE_TEXT, enableVerdict, type ActivationRecord, type RecipientCheck } from "../../activation.ts";
import { RecipientAnswer } from "../../protocol/status.ts";
import { agentDirFrom, dataDirFor, recipientProblem } from "../config/config.ts";
import type { WebhookClient } from "../delivery/http-client.ts";
import { writeActivation } from "./activation-store.ts";
import type { Report } from "./report.ts";
import type { SessionState } from "./session.ts";

/** `/anon-notify` waits this long for the server's recipient status before enabling unverified. */
export const RECIPIENT_CHECK_TIMEOUT_MS = 5_000;

export interface ToggleDeps {
  /** The bound session, read again after each await: it may be replaced meanwhile. */
  session(): SessionState | undefined;
  /** Publishes and syncs the services after the session's memory changed. */
  changed(s: SessionState): Promise<void>;
  report: Report;
}

async function checkRecipient(client: WebhookClient): Promise<RecipientCheck> {
  try {
    const answer = await client.request("GET", "recipient", { schema: RecipientAnswer, timeoutMs: RECIPIENT_CHECK_TIMEOUT_MS });
    return { kind: "answer", status: answer.status, reason: answer.reason };
  } catch (error) {
    return { kind: "network_error", message: errorText(error) };
  }
}

/** Why this session cannot be switched on, or the note and warning to enable it with. */
async function enablePreflight(s: SessionState): Promise<{ refuse: string } | { note: string; warning: string | null }> {
  if (s.subagent) return { refuse: "子 Agent 会话不能开启 Anon 通知。" };
  if (!s.config || s.configState === "invalid") return { refuse: "Anon 通知配置无效，不能开启；请按启动时的提示修正配置后执行 /reload。" };
  if (s.configState === "disabled") return { refuse: "Anon 通知已在配置中关闭（enabled: false），不能开启。" };
  const problem = recipientProblem(s.config);
  if (problem) {
    const where = join(dataDirFor(agentDirFrom(process.env)), "config.json");
    return { refuse: `不能开启 Anon 通知：${problem}。请在 ${where} 填写 recipient.qq 与 recipient.anonQq 后执行 /reload。` };
  }
  if (!s.delivery) return { refuse: "Anon 通知的发送组件未能启动，不能开启。" };
  const verdict = enableVerdict(await checkRecipient(s.delivery.client), s.config.recipient.qq, s.config.recipient.anonQq);
  return verdict.allow ? { note: verdict.statusNote, warning: verdict.warning } : { refuse: verdict.message };
}

export function registerToggleCommand(pi: ExtensionAPI, deps: ToggleDeps): void {
  const { report } = deps;
  pi.registerCommand("anon-notify", {
    description: "开启或关闭当前会话的 Anon 通知（不带参数）",
    handler: async (args: string) => {
      if (args.trim() !== "") return report(USAGE_TEXT, "warning");
      const s = deps.session();
      if (!s) return report("Anon 通知尚未就绪，请稍后再试。", "warning");
      const next = !s.active;
      let enabled: { note: string; warning: string | null } | undefined;
      if (next) {
        const preflight = await enablePreflight(s);
        if ("refuse" in preflight) return report(preflight.refuse, "error");
        enabled = preflight;
      }
      // Written first: a record that did not reach the session must not be claimed as the state.
      const record: ActivationRecord = { version: ACTIVATION_VERSION, active: next, via: "command" };
      const failure = writeActivation(pi, record, s.active);
      if (failure) return report(`无法写入会话文件，Anon 通知状态未改变：${failure}`, "error");
      if (deps.session() !== s) return; // the session was replaced while the server was asked
      s.active = next;
      s.recipientNote = enabled?.note ?? null;
      await deps.changed(s);
      if (enabled?.warning) report(enabled.warning, "warning");
      report(next ? `已开启当前会话的 Anon 通知（目标 QQ ${s.config?.recipient.qq}）。` : "已关闭当前会话的 Anon 通知。", "info");
    },
  });
}
