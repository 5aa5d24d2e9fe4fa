/** The texts about the link to the server: the real cause of a failed request, the footer's outage and its end. */
import type { ServerCause } from "../server-client/decisions.ts";

/** Codes the server answers with (recipient check, notice route, receipts), worded here. */
type ReasonCode = keyof typeof zhReasons;

/** A server's reason, the code in brackets: a known code worded here (its detail after `code:` left out), another in the server's words. */
function reasonIn(words: Record<ReasonCode, string>, open: string, close: string) {
  return (raw: string) => {
    const [code, ...rest] = raw.split(":");
    const detail = rest.join(":").trim();
    const known = Object.hasOwn(words, code!.trim()) ? words[code!.trim() as ReasonCode] : null;
    if (known) return `${known}${open}${code!.trim()}${close}`;
    return /^[a-z][a-z_]*$/.test(code!) && detail ? `${detail}${open}${code}${close}` : raw;
  };
}

const zhReasons = {
  not_configured: "服务端没有配置要通知的 QQ",
  bot_not_found: "服务端没有加载能私聊的机器人",
  bot_offline: "服务端的机器人不在线",
  not_checked: "服务端无法查看好友列表",
  not_in_friend_list: "目标不在 Anon 的好友列表中",
  no_persona: "服务端没有可用的人格（YesImBot）",
  direct_not_configured: "服务端没有配置直接发送的机器人和目标",
  persona_not_configured: "服务端没有配置机器人和目标，找不到 Anon 的主会话",
  persona_busy: "人格的会话正忙",
  send_failed: "服务端的机器人没能发出消息",
  ntfy_rate_limited: "ntfy 限流了，服务端稍后重试",
  ntfy_unavailable: "服务端连不上 ntfy，稍后重试",
  ntfy_refused: "ntfy 拒收了推送（检查服务端的 ntfyUrl、ntfyTopic、ntfyToken）",
};
const enReasons: Record<ReasonCode, string> = {
  not_configured: "the server has no recipient QQ configured",
  bot_not_found: "the server has no chat bot loaded",
  bot_offline: "the server's chat bot is offline",
  not_checked: "the server cannot see the friend list",
  not_in_friend_list: "the recipient is not in Anon's friend list",
  no_persona: "the server has no persona (YesImBot)",
  direct_not_configured: "the server has no bot and recipient for direct messages",
  persona_not_configured: "the server has no bot and recipient configured, so Anon's conversation cannot be found",
  persona_busy: "the persona's conversation is busy",
  send_failed: "the server's bot could not send the message",
  ntfy_rate_limited: "ntfy is rate-limiting; the server retries later",
  ntfy_unavailable: "the server cannot reach ntfy; it retries later",
  ntfy_refused: "ntfy refused the push (check the server's ntfyUrl, ntfyTopic, ntfyToken)",
};

export const zhLink = {
  cause: {
    no_token: (endpoint: string) => `${endpoint} 有应答，但本机没有令牌（HTTP 401）`,
    token_refused: (endpoint: string) => `${endpoint} 拒绝了本机的令牌（HTTP 401）`,
    no_answer: (endpoint: string, detail: string) => `${endpoint} 没有应答（${detail}）：服务端没有运行，或地址、端口不对`,
    not_our_server: (endpoint: string, detail: string) => `${endpoint} 处不是通知服务（${detail}）：请检查 endpoint 网址`,
    server_error: (endpoint: string, detail: string) => `${endpoint} 的服务端出错（${detail}）`,
  } satisfies Record<ServerCause, (endpoint: string, detail: string) => string>,
  reason: reasonIn(zhReasons, "（", "）"),
  noToken: (tokenFile: string) =>
    `本机没有令牌（${tokenFile} 不存在或为空，也没有 ANON_NOTIFY_TOKEN），服务端因此拒绝了请求：在线状态、指令和通知都不会生效，未送达的最终通知留在 outbox。` +
    "请把服务端的令牌写入该文件（权限 600），然后执行 /reload。",
  down: (since: string, held: number) => ` · 服务端不可达（自 ${since} 起）${held > 0 ? `，暂存通知 ${held} 条` : ""}`,
  back: (downFor: string) => `通知服务已恢复（中断约 ${downFor}）。`,
  firstFailedReceipt: (eventId: string, reason: string) =>
    `通知 ${eventId} 已被服务端接收，但无法送达：${reason}。用 /anon-notify-doctor 查看详情；本次会话不再重复提示。`,
};

export const enLink: typeof zhLink = {
  cause: {
    no_token: (endpoint) => `${endpoint} answered, but there is no token here (HTTP 401)`,
    token_refused: (endpoint) => `${endpoint} refused this machine's token (HTTP 401)`,
    no_answer: (endpoint, detail) => `${endpoint} did not answer (${detail}): the server is not running, or the address or port is wrong`,
    not_our_server: (endpoint, detail) => `${endpoint} is not the notify server (${detail}): check the endpoint URL`,
    server_error: (endpoint, detail) => `the server at ${endpoint} failed (${detail})`,
  },
  reason: reasonIn(enReasons, " (", ")"),
  noToken: (tokenFile) =>
    `There is no token here (${tokenFile} is missing or empty, and ANON_NOTIFY_TOKEN is unset), so the server refuses every request: presence, instructions and notices do not work; undelivered finals stay in the outbox. ` +
    "Put the server's token in that file (mode 600), then run /reload.",
  down: (since, held) => ` · server unreachable since ${since}${held > 0 ? `, notices held: ${held}` : ""}`,
  back: (downFor) => `The notify server is back (it was unreachable for about ${downFor}).`,
  firstFailedReceipt: (eventId, reason) =>
    `Notice ${eventId} reached the server but cannot be delivered: ${reason}. See /anon-notify-doctor; this is said once per session.`,
};
