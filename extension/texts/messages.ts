/** Every text the extension shows in Pi, in Chinese and English by `language` or the locale; the texts the
 * model reads as tool results are here too, so they speak the user's language. */
import { visibleControls } from "../../common/command-text.ts";
import { LANGUAGES, localeLanguage, type Language } from "../../common/locale.ts";
import type { ApprovalReach, ApprovalResolution, ApprovalVia } from "../../protocol/approvals.ts";
import type { ActionWords, RuleMatch } from "../approvals/policy-rules.ts";
import type { CommandOrigin } from "../../protocol/queue.ts";
import type { PushHealth } from "../../protocol/push.ts";
import type { NoticeRoute, RecipientStatus } from "../../protocol/status.ts";
import { enConfig, zhConfig } from "./config.ts";
import { enDelivery, enNotice, zhDelivery, zhNotice } from "./delivery.ts";
import { formatsIn } from "./format.ts";
import { enLink, zhLink } from "./link.ts";
import { enTools, zhTools } from "./tools.ts";

export { LANGUAGES, localeLanguage, type Language };

export const isLanguage = (value: unknown): value is Language => (LANGUAGES as readonly unknown[]).includes(value);

/** What the server said about the recipient when the session was switched on. */
export type RecipientNote = "reachable" | "unverified" | "unknown" | "no_chat";

export type FooterState = "inactive" | "active" | "suppressed" | "disabled" | "misconfigured";

type AnswerFacts = Pick<ApprovalResolution, "outcome" | "via" | "reason">;

/** Closes every approval text the model reads, whatever the language: a marker it can rely on. */
const TAG = {
  timeout: "(approval timed out: rejected)",
  aborted: "(approval cancelled: run aborted)",
  rejected: "(rejected by the user)",
  mismatch: "(approval mismatch)",
  noPerson: "(approval needs an interactive, switched-on session)",
};

const seconds = (ms: number) => Math.round(ms / 1000);
/** A wait as a person reads it: the real time, never rounded up to a minute. */
const duration = (ms: number, unit: { min: string; s: string }) => {
  const total = Math.max(1, Math.round(ms / 1000));
  const [m, sec] = [Math.floor(total / 60), total % 60];
  return [m ? `${m} ${unit.min}` : "", sec ? `${sec} ${unit.s}` : ""].filter(Boolean).join(" ");
};
type RuleSite = RuleMatch["sites"][number];
/** Each rule with the places it matched: `rm-rf ← rm -rf build`, one line whatever the command holds. */
const withSites = (rules: readonly string[], sites: readonly RuleSite[], separator: string) =>
  rules
    .map((rule) => {
      const at = sites.filter((site) => site.rule === rule && site.at !== "").map((site) => visibleControls(site.at));
      return at.length > 0 ? `${rule} ← ${at.join(" | ")}` : rule;
    })
    .join(separator);
const clock = (iso: string) => new Date(iso).toTimeString().slice(0, 5);

/** What the terminal dialog shows: the command's one-line `commandPreview` (common/command-text.ts), the characters it leaves out (the request's own
 * cut included), and whether the owner can answer from the chat too (`remote`). */
export type DialogFacts = { preview: string; hiddenChars: number; totalChars: number; reason: string; timeoutMs: number; remote: boolean };

const zh = {
  language: "zh-CN" as Language,
  config: zhConfig,
  delivery: zhDelivery,
  notice: zhNotice,
  link: zhLink,
  tools: zhTools,
  format: formatsIn("zh-CN"),
  footer: {
    inactive: "Anon 通知：未开启",
    active: "Anon 通知：已开启",
    suppressed: "Anon 通知：子 Agent，已抑制",
    disabled: "Anon 通知：已在配置中关闭",
    misconfiguredOn: "Anon 通知：已开启（配置无效，未生效）",
    misconfiguredOff: "Anon 通知：未开启（配置无效）",
    target: (qq: string) => ` → QQ ${qq}`,
    note: (note: string) => `（${note}）`,
  },
  notes: { reachable: "目标可达", unverified: "状态未核验", unknown: "状态未知", no_chat: "服务端没有聊天" } satisfies Record<RecipientNote, string>,
  notesExplained:
    "状态栏括号里的说明：（目标可达）服务端确认 Anon 能私聊目标；（状态未核验）开启时连不上服务端，没能检查；" +
    "（状态未知）服务端无法可靠检查好友关系（例如适配器不提供好友列表）。后两种情况通知照常发送，但请自己确认私聊可达。",
  setup: {
    description: "用服务端打印的配对链接把 Pi 与服务端配对：/anon-notify-setup <链接>",
    usage:
      "用法：/anon-notify-setup <配对链接>。npm start（或 Koishi 日志里的 notify-webhook）打印了这一行，形如 /anon-notify-setup http://127.0.0.1:5140/api/agent-notify/v1/pair#K7M2-Q9XD。",
    notALink: (raw: string) =>
      `“${raw}”不是配对链接：配对链接形如 http://<服务端>/api/agent-notify/v1/pair#<配对码>，由 npm start 或 Koishi 日志打印。未写入任何文件。`,
    codeRefused: "配对码无效：不存在、已用过或已过期（只能用一次，15 分钟内有效）。重启 npm start（或在 Koishi 中重启 notify-webhook 插件）可得新码",
    failed: (endpoint: string, why: string) => `未能与 ${endpoint} 配对：${why}。未写入任何文件。`,
    configKept: (path: string, why: string) => `配置文件 ${path} 无法读取（${why}），没有覆盖它，也没有写入令牌；修正或移走它后再配对。`,
    paired: (endpoint: string, config: string, token: string) => `已与 ${endpoint} 配对：接口地址和目标写入 ${config}，令牌写入 ${token}（权限 600）。`,
    reachesPerson: "服务端有应答，通知会交给它的人格。",
    healthUnknown: "配对后服务端没有应答健康检查；用 /anon-notify-doctor 检查连接。",
    placeholders: (qq: string, anonQq: string) => `这个服务端没有聊天：目标 QQ ${qq} 和 Anon QQ ${anonQq} 只是占位，不会给它们发任何消息。`,
    overridden: (names: readonly string[]) => `注意：环境变量 ${names.join("、")} 已设置，会覆盖刚写入的配置。`,
    next: "下一步：执行 /anon-notify 开启当前会话的通知（无需 /reload）。",
  },
  toggle: {
    description: "开启或关闭当前会话的 Anon 通知（不带参数）",
    usage: "用法：/anon-notify（不带参数）。当前会话未开启则开启，已开启则关闭；带参数的输入不会改变状态。诊断请用 /anon-notify-doctor。",
    notReady: "Anon 通知尚未就绪，请稍后再试。",
    subagent: "子 Agent 会话不能开启 Anon 通知。",
    invalidConfig: (active: boolean, errors: readonly string[]) =>
      `Anon 通知配置无效，状态未改变（仍为${active ? "已开启" : "未开启"}，但在修正前不会发送）：\n${errors.join("\n")}\n修正后执行 /reload。`,
    disabled: "Anon 通知已在配置中关闭（enabled: false），不能开启。",
    recipient: (problem: string, file: string) =>
      `不能开启 Anon 通知：${problem}。执行服务端打印的 /anon-notify-setup 那一行即可配对，或在 ${file} 填写 recipient.qq 与 recipient.anonQq，然后再执行 /anon-notify。`,
    noToken: (tokenFile: string) =>
      `不能开启 Anon 通知：没有令牌（${tokenFile} 不存在或为空）。执行服务端打印的 /anon-notify-setup 那一行即可配对（npm start 启动时打印它，装在 Koishi 里时在 notify-webhook 的日志里）；` +
      "或者自己创建该文件（权限 600），内容是服务端的令牌，也可以设置环境变量 ANON_NOTIFY_TOKEN。然后再执行 /anon-notify。",
    noDelivery: "Anon 通知的发送组件未能启动，不能开启。",
    tokenRejected: "未开启 Anon 通知：服务端拒绝了令牌（见上一条）。",
    writeFailed: (why: string) => `无法写入会话文件，Anon 通知状态未改变：${why}`,
    enabled: (qq: string, note: RecipientNote) => `已开启当前会话的 Anon 通知（目标 QQ ${qq}，${zh.notes[note]}）。`,
    disabledNow: "已关闭当前会话的 Anon 通知。",
    unverified: (why: string) => `目标状态未核验：${why}。已开启，服务端能应答后通知会补发。`,
    noChat: "这个服务端没有能私聊你的聊天（没有配置机器人，或机器人没有加载），不会私聊任何人，因此不检查私聊是否可达。",
    route: {
      none: (reason: string) =>
        `注意：这个服务端无法把通知送到任何人（${reason}），在 notify-webhook 配置人格（YesImBot）或直接发送的机器人之前，每条通知都会失败。已开启：指令与审批照常工作。`,
      directOnly: (reason: string) =>
        `注意：这个服务端没有人格（${reason}），只有直接发送（delivery: "direct"）的通知能送达；本扩展的通知交给人格，会失败。已开启：指令与审批照常工作。`,
      directNotReady: (reason: string) => `注意：这个服务端的直接发送尚未就绪（${reason}），通知可能失败，直到机器人上线。`,
      log: "这个服务端用日志人格：通知只打印在服务端的终端里，不会发给任何人。",
    },
    unknown: (qq: string, anonQq: string, reason: string) =>
      `服务端无法可靠检查 QQ ${qq} 与 Anon（QQ ${anonQq}）的好友状态（${reason}），已开启，但请确认私聊可达。`,
    refusedRecipient: (status: Extract<RecipientStatus, "not_added" | "unreachable">, qq: string, anonQq: string) =>
      `未开启：服务端报告 Anon（QQ ${anonQq}）${status === "not_added" ? "尚未添加" : "无法私聊"}目标 QQ ${qq}。` +
      `请先用 QQ ${qq} 添加 Anon（QQ ${anonQq}）为好友，或确认私聊可达后再执行 /anon-notify。`,
  },
  session: {
    configInvalid: (errors: readonly string[]) => `Anon 通知配置无效，扩展保持未生效：\n${errors.join("\n")}`,
    recordInvalid: (problem: string) => `会话中的 Anon 通知记录无效（${problem}），按未开启处理。`,
    deliveryFailed: (why: string) => `Anon 通知无法启动发送：${why}`,
    inheritFailed: (why: string) => `无法写入继承的 Anon 通知状态，此会话按未开启处理：${why}`,
    startOnFailed: (why: string) => `无法写入开启 Anon 通知的记录（由 anon-notify-host 启动），此会话按未开启处理：${why}`,
    swallowedPrompt: (flag: string, quoted: string, envName: string) =>
      `--${flag} 不带值，但 Pi 解析参数时把紧随其后的 ${quoted} 当成了它的值，这段提示词不会执行。` +
      `请把 --${flag} 放在提示词之后（pi -p "任务" --${flag}），或在提示词前加 --（pi -p --${flag} -- "任务"），或改用环境变量 ${envName}=1。`,
    flagDescription: "这个 Pi 进程从不发送 anon-notify 通知（由启动子 Agent 的父进程设置）",
    startOnFlagDescription: "会话还没有开关记录时，从一开始就开启 anon-notify（由 anon-notify-host 设置）",
    limitsFlagDescription: '每次运行的上限，JSON：{"turns":N,"minutes":M}（N 轮、M 分钟），超出即停止该次运行（由 anon-notify-host 设置）',
    approvalsFlagDescription: "strict：不论配置，本会话以严格模式开启审批（由 anon-notify-host 为触发器的会话设置）",
    limitStopped: (hit: "turn_limit" | "time_limit", limits: { turns?: number | undefined; minutes?: number | undefined }) =>
      hit === "turn_limit"
        ? `已停止本次运行：达到轮数上限（${limits.turns ?? 0} 轮，由 --anon-notify-limits 设定）。`
        : `已停止本次运行：达到时长上限（${limits.minutes ?? 0} 分钟，由 --anon-notify-limits 设定）。`,
    limitsInvalid: (value: string) =>
      `--anon-notify-limits 的值 ${value} 无效，应为 JSON {"turns":1–1000,"minutes":1–1440}（整数，可只写一项）：为安全起见，此 Pi 进程的每次运行都会在第一轮开始时被停止。`,
    tokenRejected: (tokenFile: string) =>
      `通知服务拒绝了令牌（HTTP 401）：在线状态、指令和通知都不会生效，未送达的最终通知留在 outbox。` +
      `请确认 ${tokenFile}（或 ANON_NOTIFY_TOKEN）与服务端的令牌一致，然后执行 /reload。`,
  },
  presence: {
    failed: (why: string) => `在线心跳发送失败：${why}`,
    noConnection: "在线心跳未启动：当前会话没有可用的服务端连接。",
  },
  commands: {
    claimFailed: (why: string) => `领取 Anon 指令失败：${why}`,
    handOverFailed: (why: string) => `Anon 指令未能交给 Pi：${why}`,
    journalWriteFailed: (file: string, why: string) => `写入指令日志失败（${file}）：${why}`,
    ackFailed: (why: string) => `确认 Anon 指令失败（租约到期后会重发并按日志去重）：${why}`,
    appendFailed: (why: string) => `Anon 指令未能写入会话：${why}`,
    controlClaimFailed: (why: string) => `领取 Anon 控制指令失败：${why}`,
    controlAckFailed: (why: string) => `确认 Anon 控制指令失败（租约到期后会重发并按日志去重）：${why}`,
    controlFailed: (kind: string, why: string) => `Anon 控制指令（${kind}）执行失败：${why}`,
    origin: { anon: "Anon 的指令", proactive: "Anon 的主动消息", operator: "操作员的指令" } satisfies Record<CommandOrigin, string>,
    label: { anon: "Anon 指令", proactive: "Anon 主动消息", operator: "操作员指令" } satisfies Record<CommandOrigin, string>,
    interrupted: (origin: CommandOrigin, instruction: string) =>
      `${zh.commands.origin[origin]}已进入会话，但这次运行被中断，尚未得到回复：${instruction}。发送任意消息即可让 Agent 继续处理。`,
    noConnection: "Anon 指令通道未启动：当前会话没有可用的服务端连接。",
    journalSkipped: (file: string, lines: number) => `指令日志 ${file} 有 ${lines} 行无法识别，已跳过`,
    journalUnreadable: (file: string, why: string) => `无法读取指令日志 ${file}，不领取 Anon 指令：${why}`,
  },
  send: {
    unreadable: (why: string) => `另一个扩展的 anon-notify:send 请求无法读取，已忽略：${why}`,
    invalid: (why: string) => `另一个扩展的 anon-notify:send 请求无效，已忽略：${why}`,
  },
  sink: { tokenUnavailable: (file: string, why: string) => `桌面通道未启用：令牌文件 ${file} 不可用（${why}）` },
  approvals: {
    actions: {
      diskWrite: "写磁盘设备",
      outside: "写入项目外",
      opaque: "看不清将运行什么",
      protectedPath: "涉及受保护路径",
      notKnownSafe: "不在安全清单上",
    } satisfies ActionWords,
    via: {
      chat: "在聊天中",
      operator: "通过运维接口",
      console: "在控制台",
      ntfy: "在手机推送上",
      terminal: "在终端",
      policy: "按策略",
      timeout: "超时",
      aborted: "因运行中断",
    } satisfies Record<ApprovalVia, string>,
    dialogTitle: (action: string) => `需要批准：${visibleControls(action)}`,
    dialogMessage: (facts: DialogFacts) =>
      [
        "──── 将要运行（原文；控制字符与换行已显示为 ⏎ \\t 等可见符号）────",
        facts.preview,
        "──── 命令结束 ────",
        ...(facts.hiddenChars > 0
          ? [`命令共 ${facts.totalChars} 字符，中间 ${facts.hiddenChars} 字符未显示；完整命令可在聊天中用 anon.approval <审批码>、控制台或运维接口查看。`]
          : []),
        ...(facts.reason ? [`理由：${visibleControls(facts.reason)}`] : []),
        `${duration(facts.timeoutMs, { min: "分钟", s: "秒" })}内无人回答则拒绝。${facts.remote ? "也可以在聊天中回答，先到的答案为准。" : ""}`,
      ].join("\n"),
    requestPushed: (code: string, route: string) => `审批请求正在推送到手机（${route}），审批码 ${code}；在这里、手机上或控制台回答均可，先到的答案为准。`,
    requestReach: {
      sent: (code: string) => `审批请求已发到聊天，审批码 ${code}；在这里或聊天中回答均可。`,
      queued: (code: string) => `审批请求还没送到聊天（服务端会一直重试），审批码 ${code}；可以在这里、控制台或送到后在聊天中回答。`,
      none: (code: string) => `没有可发的聊天，审批请求没有发出（审批码 ${code}）；请在这里或控制台回答。`,
    } satisfies Record<ApprovalReach, (code: string) => string>,
    answeredElsewhere: (action: string, answer: AnswerFacts) =>
      answer.outcome === "timeout"
        ? `「${visibleControls(action)}」已超时拒绝，终端对话框已关闭。`
        : `「${visibleControls(action)}」已${zh.approvals.via[answer.via]}${answer.outcome === "approved" ? "批准" : "拒绝"}，终端对话框已关闭。`,
    requestFailed: (why: string) => `审批请求未能送达服务端，只能在终端回答：${why}`,
    grammarUnavailable: (why: string) => `无法加载 bash 语法分析器，每条命令都将请求批准：${why}`,
    resolutionFailed: (why: string) => `审批结果未能告知服务端（服务端会在会话离线或到期时自行关闭）：${why}`,
    rules: (rules: readonly string[], sites: readonly RuleSite[] = []) =>
      `规则 ${withSites(rules, sites, "、")}${rules.some((rule) => rule.startsWith("opaque.")) ? "（看不清将运行什么：程序名或代码来自展开、管道或无法解析的文本，必须由人确认）" : ""}${rules.some((rule) => rule.startsWith("strict.")) ? "（严格模式：只有安全清单上的命令和 approval.allow 允许的命令无需批准）" : ""}`,
    tooLong: (chars: number, limit: number) =>
      `已拒绝：命令共 ${chars} 字符，超过审批能完整显示的 ${limit} 字符；审批只针对完整可见的命令，不会只显示一部分。请拆成较短的命令或写成项目内的脚本文件后再运行。${TAG.rejected}`,
    grantApplied: (action: string, via: ApprovalVia, expiresAt: string) =>
      `「${visibleControls(action)}」已由主人${zh.approvals.via[via]}设定的长期授权批准（有效至 ${clock(expiresAt)}）。`,
    previewChars: (count: number) => `（${count} 字符）`,
    // What the model reads as a tool result: what happened and what to do next, ending in a tag that is the same in every language.
    refusal: (action: string, answer: AnswerFacts, timeoutMs: number) => {
      if (answer.outcome === "timeout") {
        return `「${visibleControls(action)}」等待批准超时（${seconds(timeoutMs)} 秒内无人回答），已按拒绝处理；不要重试，向用户说明需要批准后再继续。${TAG.timeout}`;
      }
      if (answer.via === "aborted") return `「${visibleControls(action)}」的审批因运行被中断而取消，未执行。${TAG.aborted}`;
      const why = answer.reason ? `，理由：${answer.reason}` : "";
      return `用户${zh.approvals.via[answer.via]}拒绝了「${visibleControls(action)}」${why}。不要重试同一操作，等待用户的进一步指示。${TAG.rejected}`;
    },
    askResult: (answer: AnswerFacts) => {
      const why = answer.reason ? `：${answer.reason}` : "";
      const via = zh.approvals.via[answer.via];
      if (answer.outcome === "approved") return `approved — 用户${via}批准了${why}。可以继续执行。`;
      if (answer.outcome === "timeout") return "timeout — 等待批准超时，无人回答，按拒绝处理；不要执行该操作。";
      return `rejected — ${answer.via === "aborted" || answer.via === "policy" ? via : `用户${via}`}拒绝${why}。不要执行该操作。`;
    },
    mismatch: (action: string) => `「${visibleControls(action)}」的参数在等待批准时被改动，批准不适用于改动后的调用。${TAG.mismatch}`,
    noPerson: (action: string, rules: readonly string[]) =>
      `已拦截「${visibleControls(action)}」（${zh.approvals.rules(rules)}）：需要人工批准，但当前没有人能回答（审批只在有界面或已开启 Anon 通知的交互会话中进行；打印/JSON 模式与子 Agent 中直接拒绝）。${TAG.noPerson}`,
    nobodyToAsk: "当前没有人能回答审批（需要有界面或已开启 Anon 通知的交互会话）",
  },
  doctor: {
    description: "诊断 Anon 通知：配置来源、令牌、服务端、目标、在线状态与投递（加 test 发一条测试通知）",
    usage: "用法：/anon-notify-doctor 或 /anon-notify-doctor test（经真实路径发一条测试通知并报告回执）。",
    title: "Anon 通知诊断",
    yes: "是",
    no: "否",
    none: "无",
    section: { config: "配置", token: "令牌", server: "服务端", recipient: "目标", session: "会话", delivery: "投递", test: "测试通知" },
    fileStatus: { loaded: "已读取", missing: "不存在", skipped: "未读取（未被信任）", invalid: "无效" },
    layer: { default: "默认值", legacy: "旧位置（扩展自己的目录）的配置", user: "用户配置", project: "项目配置", env: "环境变量" },
    configInvalid: "配置无效，扩展未生效：",
    valueFrom: (key: string, value: string, from: string) => `${key} = ${value}  ← ${from}`,
    tokenFrom: { env: "环境变量 ANON_NOTIFY_TOKEN", inline: "配置中的 token", file: "令牌文件", none: "没有令牌" },
    tokenFile: (path: string, state: string) => `令牌文件 ${path}：${state}`,
    tokenFileState: { present: "存在", missing: "不存在", empty: "为空", unreadable: "无法读取" },
    tokenUsed: (from: string) => `使用：${from}`,
    operatorTokenReadable: (path: string) =>
      `警告：服务端的运维令牌 ${path} 能被 Pi 运行所用的用户读到——代理可以借它自己批准审批。请用另一个系统用户运行服务端（见 README“审批模式”）。`,
    notChecked: (why: string) => `未检查（${why}）`,
    noClient: "没有可用的服务端连接",
    reachable: (endpoint: string, version: string, events: number, commands: number) =>
      `${endpoint} 可达：版本 ${version}，协议 events ${events} / commands ${commands}`,
    unreachable: (endpoint: string, why: string) => `${endpoint} 不可达：${why}`,
    capabilities: (list: string) => `能力：${list}`,
    routes: {
      persona: "交给人格（Anon）转述",
      direct: "由机器人直接私聊发送",
      log: "只打印在服务端终端（日志人格，不告诉任何人）",
      none: "无处可去",
    } satisfies Record<NoticeRoute, string>,
    noticeRoute: (route: string, problem: string | null) => `通知去向：${route}${problem ? `；未就绪：${problem}` : ""}`,
    chat: (loaded: boolean): string => (loaded ? "聊天：已加载能私聊目标的机器人" : "聊天：没有（这个服务端不能私聊任何人）"),
    push: (push: PushHealth, reason: (raw: string) => string): string => {
      if (push.route === "none") return "手机推送：没有配置（ntfy，见 README）";
      const answers = push.answers === "buttons" ? "审批可在通知上直接批准或拒绝" : "审批通知只说明怎么回答（服务端没有配置 publicUrl）";
      const last = push.last ? `最近一次 ${push.last.state}${push.last.error ? `：${reason(push.last.error)}` : ""}` : "还没有推送过";
      return `手机推送：${push.route}，${answers}；${last}`;
    },
    recipientAnswer: (qq: string, anonQq: string, status: string, reason: string | null) =>
      `QQ ${qq}，Anon QQ ${anonQq}：${status}${reason ? `，${reason}` : ""}`,
    recipientError: (why: string) => `无法询问：${why}`,
    sessionLine: (status: string) => `状态：${status}`,
    presenceLine: (running: boolean, accepted: boolean) => `在线心跳：${running ? (accepted ? "运行中，服务端已接受" : "运行中，尚未被服务端接受") : "未运行"}`,
    commandsLine: (running: boolean, enabled: boolean, held: string | null, queued: number) =>
      `指令通道：${!enabled ? "已在配置中关闭" : running ? "运行中" : "未运行"}${held ? `，等待交付 ${held}` : ""}${queued > 0 ? `，已交给 Pi ${queued} 条` : ""}`,
    lastFailure: (why: string) => `最近一次失败：${why}`,
    outbox: (count: number, oldest: string | null) => `outbox 待重发：${count} 条${oldest ? `（最早 ${oldest}）` : ""}`,
    outboxError: (why: string) => `outbox 无法读取：${why}`,
    lastDelivery: (eventId: string, status: string, at: string, result: string) => `最近一次投递：${eventId}（${status}，${at}）→ ${result}`,
    lastDeliveryNone: "本次启动以来尚未投递通知",
    accepted: (state: string) => `已接受，回执 ${state}`,
    receiptNow: (state: string, reason: string | null) => `已接受，当前回执 ${state}${reason ? `：${reason}` : ""}`,
    printedOnly: (state: string) => `${state}（只打印在服务端终端，没有告诉任何人）`,
    failed: (attempts: number, why: string) => `失败（${attempts} 次尝试）：${why}`,
    testHint: "发送测试通知：/anon-notify-doctor test",
    testSent: (eventId: string) => `已发送 ${eventId}`,
    testReceipt: (state: string, error: string | null, final: boolean) =>
      `回执：${state}${error ? `（${error}）` : ""}${final ? "" : "（等待超时，尚未最终完成）"}`,
    testFailed: (why: string) => `发送失败：${why}`,
    testSummary: "anon-notify 测试通知：诊断命令发出，无需处理。",
  },
};

export type Messages = typeof zh;

const en: Messages = {
  language: "en-US",
  config: enConfig,
  delivery: enDelivery,
  notice: enNotice,
  link: enLink,
  tools: enTools,
  format: formatsIn("en-US"),
  footer: {
    inactive: "Anon notices: off",
    active: "Anon notices: on",
    suppressed: "Anon notices: subagent, suppressed",
    disabled: "Anon notices: disabled in the config",
    misconfiguredOn: "Anon notices: on (config invalid, not in effect)",
    misconfiguredOff: "Anon notices: off (config invalid)",
    target: (qq) => ` → QQ ${qq}`,
    note: (note) => ` (${note})`,
  },
  notes: { reachable: "recipient reachable", unverified: "status unverified", unknown: "status unknown", no_chat: "no chat on the server" },
  notesExplained:
    "The note in brackets in the footer: (recipient reachable) the server confirmed Anon can message the recipient; " +
    "(status unverified) the server could not be reached when the session was switched on; (status unknown) the server cannot check " +
    "the friend list reliably (e.g. the adapter offers none). In the last two cases notices are still sent: check that a private chat works.",
  setup: {
    description: "Pair Pi with a server using the link it printed: /anon-notify-setup <link>",
    usage:
      "Usage: /anon-notify-setup <pairing link>. npm start (or notify-webhook in the Koishi log) printed the line, like /anon-notify-setup http://127.0.0.1:5140/api/agent-notify/v1/pair#K7M2-Q9XD.",
    notALink: (raw) =>
      `"${raw}" is not a pairing link: a pairing link looks like http://<server>/api/agent-notify/v1/pair#<code>, as npm start or the Koishi log prints it. Nothing was written.`,
    codeRefused:
      "the pairing code is not valid: unknown, used already or expired (it works once, for 15 minutes). Restart npm start (or the notify-webhook plugin in Koishi) for a new one",
    failed: (endpoint, why) => `Could not pair with ${endpoint}: ${why}. Nothing was written.`,
    configKept: (path, why) =>
      `The config file ${path} cannot be read (${why}); it was not overwritten and no token was written. Fix or move it, then pair again.`,
    paired: (endpoint, config, token) => `Paired with ${endpoint}: the endpoint and the recipient are in ${config}, the token in ${token} (mode 600).`,
    reachesPerson: "The server answers; notices go to its persona.",
    healthUnknown: "The server did not answer its health check after pairing; /anon-notify-doctor checks the connection.",
    placeholders: (qq, anonQq) => `This server has no chat: the recipient QQ ${qq} and Anon's QQ ${anonQq} are placeholders that nothing is ever sent to.`,
    overridden: (names) => `Note: the environment sets ${names.join(", ")}, which override what was just written.`,
    next: "Next: run /anon-notify to switch notices on for this session (no /reload needed).",
  },
  toggle: {
    description: "Switch Anon notices for this session on or off (no arguments)",
    usage:
      "Usage: /anon-notify (no arguments). Switches this session on when it is off and off when it is on; with arguments nothing changes. For diagnostics use /anon-notify-doctor.",
    notReady: "Anon notices are not ready yet; try again in a moment.",
    subagent: "A subagent session cannot switch Anon notices on.",
    invalidConfig: (active, errors) =>
      `The Anon notices config is invalid; nothing changed (still ${active ? "on" : "off"}, but nothing is sent until it is fixed):\n${errors.join("\n")}\nFix it, then run /reload.`,
    disabled: "Anon notices are disabled in the config (enabled: false) and cannot be switched on.",
    recipient: (problem, file) =>
      `Cannot switch Anon notices on: ${problem}. Run the /anon-notify-setup line the server printed to pair, or set recipient.qq and recipient.anonQq in ${file}; then run /anon-notify again.`,
    noToken: (tokenFile) =>
      `Cannot switch Anon notices on: there is no token (${tokenFile} is missing or empty). Run the /anon-notify-setup line the server printed to pair (npm start prints it at start; inside Koishi it is in notify-webhook's log), ` +
      "or create that file yourself (mode 600) holding the server's token, or set ANON_NOTIFY_TOKEN. Then run /anon-notify again.",
    noDelivery: "Anon notices could not start their sender, so they cannot be switched on.",
    tokenRejected: "Anon notices not switched on: the server refused the token (see above).",
    writeFailed: (why) => `Could not write the session file; Anon notices unchanged: ${why}`,
    enabled: (qq, note) => `Anon notices are on for this session (recipient QQ ${qq}, ${en.notes[note]}).`,
    disabledNow: "Anon notices are off for this session.",
    unverified: (why) => `The recipient is unverified: ${why}. Switched on; notices go out once the server answers.`,
    noChat: "This server has no chat that reaches you (no bot configured, or its bot is not loaded): it messages nobody, so no private chat is checked.",
    route: {
      none: (reason) =>
        `Note: this server cannot deliver notices to anyone (${reason}); every notice fails until a persona (YesImBot) or a direct bot is configured in notify-webhook. Switched on: instructions and approvals still work.`,
      directOnly: (reason) =>
        `Note: this server has no persona (${reason}); only notices sent directly (delivery: "direct") arrive, and this extension's notices go to the persona, so they fail. Switched on: instructions and approvals still work.`,
      directNotReady: (reason) => `Note: this server's direct sending is not ready (${reason}); notices may fail until its bot is online.`,
      log: "This server uses the log persona: notices are only printed in the server's terminal; nobody is messaged.",
    },
    unknown: (qq, anonQq, reason) =>
      `The server cannot reliably check whether QQ ${qq} and Anon (QQ ${anonQq}) are friends (${reason}). Switched on; check that a private chat works.`,
    refusedRecipient: (status, qq, anonQq) =>
      `Not switched on: the server reports that Anon (QQ ${anonQq}) ${status === "not_added" ? "has not added" : "cannot message"} QQ ${qq}. ` +
      `Add Anon (QQ ${anonQq}) as a friend from QQ ${qq}, or make sure a private chat works, then run /anon-notify again.`,
  },
  session: {
    configInvalid: (errors) => `The Anon notices config is invalid; the extension stays inactive:\n${errors.join("\n")}`,
    recordInvalid: (problem) => `The session's Anon notices record is invalid (${problem}); treated as off.`,
    deliveryFailed: (why) => `Anon notices cannot start their sender: ${why}`,
    inheritFailed: (why) => `Could not write the inherited Anon notices state; this session is treated as off: ${why}`,
    startOnFailed: (why) => `Could not write the record that switches Anon notices on (started by anon-notify-host); this session is treated as off: ${why}`,
    swallowedPrompt: (flag, quoted, envName) =>
      `--${flag} takes no value, but Pi's argument parser took the ${quoted} after it as its value, so that prompt would never run. ` +
      `Put --${flag} after the prompt (pi -p "task" --${flag}), end the options with -- (pi -p --${flag} -- "task"), or set ${envName}=1 instead.`,
    flagDescription: "Never send anon-notify notices from this Pi process (set by parents that spawn subagents)",
    startOnFlagDescription: "Switch anon-notify on from the session's start when it has no on/off record yet (set by anon-notify-host)",
    limitsFlagDescription: 'Limits for each run, as JSON {"turns":N,"minutes":M}: a run past either is stopped (set by anon-notify-host)',
    approvalsFlagDescription:
      "strict: approvals on in strict mode for this session, whatever the config says (set by anon-notify-host for a trigger's session)",
    limitStopped: (hit, limits) =>
      hit === "turn_limit"
        ? `Stopped this run: it reached its limit of ${limits.turns ?? 0} turns (set by --anon-notify-limits).`
        : `Stopped this run: it reached its limit of ${limits.minutes ?? 0} minutes (set by --anon-notify-limits).`,
    limitsInvalid: (value) =>
      `--anon-notify-limits ${value} is invalid; it takes JSON {"turns":1–1000,"minutes":1–1440} (whole numbers, either may be left out): to stay safe, every run of this Pi process is stopped at its first turn.`,
    tokenRejected: (tokenFile) =>
      "The notify server rejected the token (HTTP 401): presence, instructions and notices do not work; undelivered finals stay in the outbox. " +
      `Check that ${tokenFile} (or ANON_NOTIFY_TOKEN) holds the server's token, then run /reload.`,
  },
  presence: {
    failed: (why) => `Presence heartbeat failed: ${why}`,
    noConnection: "Presence not started: this session has no server connection.",
  },
  commands: {
    claimFailed: (why) => `Claiming Anon instructions failed: ${why}`,
    handOverFailed: (why) => `An Anon instruction could not be handed to Pi: ${why}`,
    journalWriteFailed: (file, why) => `Writing the instruction journal failed (${file}): ${why}`,
    ackFailed: (why) => `Confirming an Anon instruction failed (it comes back after its lease and the journal dedups it): ${why}`,
    appendFailed: (why) => `An Anon instruction could not be written into the session: ${why}`,
    controlClaimFailed: (why) => `Claiming Anon control commands failed: ${why}`,
    controlAckFailed: (why) => `Confirming an Anon control command failed (it comes back after its lease and the journal dedups it): ${why}`,
    controlFailed: (kind, why) => `The Anon control command (${kind}) failed: ${why}`,
    origin: { anon: "Anon's instruction", proactive: "Anon's message", operator: "The operator's instruction" },
    label: { anon: "Anon's instruction", proactive: "Message from Anon", operator: "Operator's instruction" },
    interrupted: (origin, instruction) =>
      `${en.commands.origin[origin]} reached the session, but the run was interrupted before it was answered: ${instruction}. Send any message to let the agent continue.`,
    noConnection: "Instruction channel not started: this session has no server connection.",
    journalSkipped: (file, lines) => `Instruction journal ${file}: ${lines} unreadable lines skipped`,
    journalUnreadable: (file, why) => `Cannot read the instruction journal ${file}; no Anon instructions are claimed: ${why}`,
  },
  send: {
    unreadable: (why) => `Another extension's anon-notify:send request could not be read and was ignored: ${why}`,
    invalid: (why) => `Another extension's anon-notify:send request is invalid and was ignored: ${why}`,
  },
  sink: { tokenUnavailable: (file, why) => `Desktop channel off: its token file ${file} is unusable (${why})` },
  approvals: {
    actions: {
      diskWrite: "write to a disk device",
      outside: "write outside the project",
      opaque: "cannot see what will run",
      protectedPath: "touch a protected path",
      notKnownSafe: "not on the safe list",
    },
    via: {
      chat: "in the chat",
      operator: "through the operator API",
      console: "in the console",
      ntfy: "on the phone push",
      terminal: "in the terminal",
      policy: "by the policy",
      timeout: "by timing out",
      aborted: "because the run was aborted",
    },
    dialogTitle: (action) => `Approval needed: ${visibleControls(action)}`,
    dialogMessage: (facts) =>
      [
        "──── Will run (verbatim; control characters and line breaks shown as ⏎ \\t …) ────",
        facts.preview,
        "──── end of command ────",
        ...(facts.hiddenChars > 0
          ? [
              `The command has ${facts.totalChars} characters; ${facts.hiddenChars} in the middle are not shown. See all of it with anon.approval <code> in the chat, in the console or through the operator API.`,
            ]
          : []),
        ...(facts.reason ? [`Reason: ${visibleControls(facts.reason)}`] : []),
        `Rejected if nobody answers within ${duration(facts.timeoutMs, { min: "min", s: "s" })}.${facts.remote ? " You can also answer in the chat; the first answer counts." : ""}`,
      ].join("\n"),
    requestPushed: (code, route) =>
      `The approval request is being pushed to your phone (${route}), code ${code}; answer here, on the phone or in the console; the first answer counts.`,
    requestReach: {
      sent: (code) => `The approval request went to the chat with code ${code}; answer here or there.`,
      queued: (code) =>
        `The approval request has not reached the chat yet (the server keeps retrying), code ${code}; answer here, in the console, or in the chat once it arrives.`,
      none: (code) => `There is no chat to send to, so no approval request was sent (code ${code}); answer here or in the console.`,
    },
    answeredElsewhere: (action, answer) =>
      answer.outcome === "timeout"
        ? `"${visibleControls(action)}" timed out and was rejected; the terminal dialog is closed.`
        : `"${visibleControls(action)}" was ${answer.outcome === "approved" ? "approved" : "rejected"} ${en.approvals.via[answer.via]}; the terminal dialog is closed.`,
    requestFailed: (why) => `The approval request did not reach the server; it can only be answered in the terminal: ${why}`,
    grammarUnavailable: (why) => `The bash grammar could not be loaded, so every command will ask for approval: ${why}`,
    resolutionFailed: (why) => `The server was not told how the approval ended (it closes it itself when the session goes offline or it expires): ${why}`,
    rules: (rules, sites = []) =>
      `rule ${withSites(rules, sites, ", ")}${rules.some((rule) => rule.startsWith("opaque.")) ? " (what will run cannot be seen: a program name or code comes from an expansion, a pipe or unparsable text, so a person must confirm)" : ""}${rules.some((rule) => rule.startsWith("strict.")) ? " (strict mode: only safe-listed commands and those approval.allow names run unasked)" : ""}`,
    tooLong: (chars, limit) =>
      `Refused: the command is ${chars} characters, more than the ${limit} an approval can show whole; approvals are only for commands a person sees in full, never in part. Split it into shorter commands, or write it to a script file in the project and run that. ${TAG.rejected}`,
    grantApplied: (action, via, expiresAt) =>
      `"${visibleControls(action)}" was approved by the owner's standing grant set ${en.approvals.via[via]} (valid until ${clock(expiresAt)}).`,
    previewChars: (count) => ` (${count} chars)`,
    refusal: (action, answer, timeoutMs) => {
      if (answer.outcome === "timeout") {
        return `"${visibleControls(action)}" was not approved in time (nobody answered within ${seconds(timeoutMs)} s) and counts as rejected; do not retry; tell the user it needs approval before going on. ${TAG.timeout}`;
      }
      if (answer.via === "aborted")
        return `The approval of "${visibleControls(action)}" was cancelled because the run was aborted; it did not run. ${TAG.aborted}`;
      const why = answer.reason ? `, reason: ${answer.reason}` : "";
      return `The user rejected "${visibleControls(action)}" ${en.approvals.via[answer.via]}${why}. Do not retry the same operation; wait for the user's further instructions. ${TAG.rejected}`;
    },
    askResult: (answer) => {
      const why = answer.reason ? `: ${answer.reason}` : "";
      const via = en.approvals.via[answer.via];
      if (answer.outcome === "approved") return `approved — the user approved ${via}${why}. You may go ahead.`;
      if (answer.outcome === "timeout") return "timeout — nobody answered in time; this counts as rejected. Do not perform the operation.";
      return `rejected — ${answer.via === "aborted" || answer.via === "policy" ? "rejected" : "the user rejected it"} ${via}${why}. Do not perform the operation.`;
    },
    mismatch: (action) =>
      `The arguments of "${visibleControls(action)}" changed while it waited for approval; the approval does not apply to the changed call. ${TAG.mismatch}`,
    noPerson: (action, rules) =>
      `Blocked "${visibleControls(action)}" (${en.approvals.rules(rules)}): it needs a person's approval, but nobody can answer now (approvals happen only in an interactive session with a UI or with Anon notices switched on; print/JSON mode and subagents reject at once). ${TAG.noPerson}`,
    nobodyToAsk: "nobody can answer an approval now (it needs an interactive session with a UI or with Anon notices switched on)",
  },
  doctor: {
    description: "Diagnose Anon notices: config sources, token, server, recipient, presence, delivery (add test to send a test notice)",
    usage: "Usage: /anon-notify-doctor, or /anon-notify-doctor test (sends a test notice through the real route and reports its receipt).",
    title: "Anon notices doctor",
    yes: "yes",
    no: "no",
    none: "none",
    section: { config: "Config", token: "Token", server: "Server", recipient: "Recipient", session: "Session", delivery: "Delivery", test: "Test notice" },
    fileStatus: { loaded: "loaded", missing: "missing", skipped: "not read (not trusted)", invalid: "invalid" },
    layer: {
      default: "default",
      legacy: "config in the old place (the extension's own folder)",
      user: "user config",
      project: "project config",
      env: "environment",
    },
    configInvalid: "The config is invalid; the extension is inactive:",
    valueFrom: (key, value, from) => `${key} = ${value}  ← ${from}`,
    tokenFrom: { env: "environment variable ANON_NOTIFY_TOKEN", inline: "token in the config", file: "token file", none: "no token" },
    tokenFile: (path, state) => `token file ${path}: ${state}`,
    tokenFileState: { present: "present", missing: "missing", empty: "empty", unreadable: "unreadable" },
    tokenUsed: (from) => `in use: ${from}`,
    operatorTokenReadable: (path) =>
      `warning: the server's operator token ${path} is readable by the user Pi runs as, so the agent could use it to approve its own calls. Run the server as another OS user (see "Approval modes" in the README).`,
    notChecked: (why) => `not checked (${why})`,
    noClient: "no server connection",
    reachable: (endpoint, version, events, commands) => `${endpoint} reachable: version ${version}, protocol events ${events} / commands ${commands}`,
    unreachable: (endpoint, why) => `${endpoint} unreachable: ${why}`,
    capabilities: (list) => `capabilities: ${list}`,
    routes: {
      persona: "handed to the persona (Anon), who tells them",
      direct: "sent directly by the bot in a private chat",
      log: "only printed in the server's terminal (the log persona; nobody is told)",
      none: "nowhere",
    },
    noticeRoute: (route, problem) => `notices go: ${route}${problem ? `; not ready: ${problem}` : ""}`,
    chat: (loaded) => (loaded ? "chat: a bot that can message the recipient is loaded" : "chat: none (this server cannot message anyone)"),
    push: (push, reason) => {
      if (push.route === "none") return "phone push: not configured (ntfy, see the README)";
      const answers =
        push.answers === "buttons" ? "approvals can be answered on the notification" : "approval pushes only say how to answer (the server has no publicUrl)";
      const last = push.last ? `last one ${push.last.state}${push.last.error ? `: ${reason(push.last.error)}` : ""}` : "nothing pushed yet";
      return `phone push: ${push.route}, ${answers}; ${last}`;
    },
    recipientAnswer: (qq, anonQq, status, reason) => `QQ ${qq}, Anon QQ ${anonQq}: ${status}${reason ? `, ${reason}` : ""}`,
    recipientError: (why) => `cannot ask: ${why}`,
    sessionLine: (status) => `state: ${status}`,
    presenceLine: (running, accepted) =>
      `presence: ${running ? (accepted ? "running, accepted by the server" : "running, not yet accepted by the server") : "not running"}`,
    commandsLine: (running, enabled, held, queued) =>
      `instruction channel: ${!enabled ? "disabled in the config" : running ? "running" : "not running"}${held ? `, holding ${held}` : ""}${queued > 0 ? `, ${queued} handed to Pi` : ""}`,
    lastFailure: (why) => `last failure: ${why}`,
    outbox: (count, oldest) => `outbox backlog: ${count}${oldest ? ` (oldest ${oldest})` : ""}`,
    outboxError: (why) => `outbox unreadable: ${why}`,
    lastDelivery: (eventId, status, at, result) => `last delivery: ${eventId} (${status}, ${at}) → ${result}`,
    lastDeliveryNone: "no notice delivered since this start",
    accepted: (state) => `accepted, receipt ${state}`,
    receiptNow: (state, reason) => `accepted; receipt now ${state}${reason ? `: ${reason}` : ""}`,
    printedOnly: (state) => `${state} (only printed in the server's terminal; nobody was told)`,
    failed: (attempts, why) => `failed (${attempts} attempts): ${why}`,
    testHint: "send a test notice: /anon-notify-doctor test",
    testSent: (eventId) => `sent ${eventId}`,
    testReceipt: (state, error, final) => `receipt: ${state}${error ? ` (${error})` : ""}${final ? "" : " (timed out before it was final)"}`,
    testFailed: (why) => `send failed: ${why}`,
    testSummary: "anon-notify test notice from the doctor command; nothing to do.",
  },
};

const CATALOGUES: Record<Language, Messages> = { "zh-CN": zh, "en-US": en };
export const messagesFor = (language: Language): Messages => CATALOGUES[language];

/** The footer text: the saved switch always shows, with what keeps it from working, and an outage while it lasts. */
export function footerText(
  m: Messages,
  state: FooterState,
  active: boolean,
  target: { qq: string; note: RecipientNote | null } | null,
  outage: { since: number; held: number } | null = null,
): string {
  if (state === "misconfigured") return active ? m.footer.misconfiguredOn : m.footer.misconfiguredOff;
  if (state !== "active" || !target) return m.footer[state];
  const down = outage ? m.link.down(m.format.clock(outage.since), outage.held) : "";
  return m.footer.active + m.footer.target(target.qq) + (target.note ? m.footer.note(m.notes[target.note]) : "") + down;
}
