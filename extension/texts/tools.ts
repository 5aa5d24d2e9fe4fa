/** What the model reads about the extension's tools, in the language the person chose. */

export const zhTools = {
  ask: {
    label: "请求批准",
    description:
      "在执行有风险或不可逆的操作之前请用户批准（删除数据、发布、对外发送、花钱等）。调用会等待用户在终端或聊天中回答，" +
      "返回 approved、rejected 或 timeout 及理由。只有 approved 才能继续；rejected 或 timeout 时不要执行该操作，也不要换个方式绕过。",
    snippet: "执行有风险或不可逆的操作前请用户批准",
    params: {
      action: "要批准的操作，简短标签，例如 “删除 build 目录”、“发布 v2.0”",
      reason: (chars: number) => `为什么需要这个操作（≤${chars} 字）`,
      payload: "给用户看的预览：命令、差异摘要或目标，可省略",
    },
  },
  progress: {
    label: "汇报进度",
    description: (perMinute: number) =>
      "在长任务的关键节点向用户汇报进度。只在这些时刻调用：一个阶段完成（done）、失败（failed）、被阻塞或需要用户决定/批准（blocked、awaiting_approval）。" +
      "不要为日常步骤、每次工具调用或思考过程调用；任务最终完成时不必调用，系统会自动通知。" +
      `收件人由系统配置决定，无法指定；每次运行每分钟最多 ${perMinute} 条，连续两条 progress 只发第一条。`,
    snippet: "在阶段完成、失败或需要用户决定时向用户汇报（收件人由系统决定）",
    params: {
      stage: "阶段",
      summary: "一句话结论，不要罗列过程",
      detail: "失败原因、需要用户决定的事或产物路径，可省略",
      artifact: "可跳转的链接（http/https）：trace、PR、报告页",
      severity: "严重程度，默认 info",
    },
    notSent: (reason: string) => `未发送：${reason}`,
    submitted: "已提交进度汇报；收件人由系统配置决定。",
  },
};

export const enTools: typeof zhTools = {
  ask: {
    label: "Ask approval",
    description:
      "Ask the user to approve a risky or irreversible operation before doing it (deleting data, publishing, sending something out, spending money, …). " +
      "The call waits for the user to answer in the terminal or the chat and returns approved, rejected or timeout with the reason. " +
      "Go ahead only on approved; on rejected or timeout do not perform the operation, and do not work around it another way.",
    snippet: "Ask the user to approve a risky or irreversible operation before doing it",
    params: {
      action: 'The operation to approve, as a short label, e.g. "delete the build folder", "publish v2.0"',
      reason: (chars) => `Why the operation is needed (≤${chars} characters)`,
      payload: "A preview for the user: the command, a summary of the diff or the target; may be left out",
    },
  },
  progress: {
    label: "Report progress",
    description: (perMinute) =>
      "Report progress to the user at the key points of a long task. Call it only when a stage is done (done), has failed (failed), is blocked or needs the user to decide or approve (blocked, awaiting_approval). " +
      "Do not call it for routine steps, for each tool call or for your thinking; there is no need to call it when the whole task is finished, the system tells the user itself. " +
      `The system's configuration decides who receives it, it cannot be chosen; at most ${perMinute} reports a minute per run, and of two progress reports in a row only the first is sent.`,
    snippet: "Report to the user when a stage is done, fails or needs the user to decide (the system decides who receives it)",
    params: {
      stage: "The stage",
      summary: "The outcome in one sentence; do not list the steps",
      detail: "Why it failed, what the user must decide, or where the result is; may be left out",
      artifact: "A link to open (http/https): a trace, a PR, a report page",
      severity: "How serious it is; info by default",
    },
    notSent: (reason) => `Not sent: ${reason}`,
    submitted: "The progress report was handed in; the system's configuration decides who receives it.",
  },
};
