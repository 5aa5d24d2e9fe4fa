/**
 * `npm run demo`: the whole loop on a fresh clone, no API key, nothing left behind. It starts the
 * standalone notify-webhook server (log persona) and a real Pi session driven by pi-ai's faux
 * model, switches the session on, lets a run finish (the completion notice reaches the persona),
 * sends an instruction through the operator API (it reaches the session and is answered), and
 * cancels one that then never arrives; then the owner does the same from a private chat with the
 * bot (plugin-mock stands in for QQ), and starts a new session there with `anon.new`, which
 * anon-notify-host runs with Pi's own CLI (a stub model on loopback). Everything runs in a temp folder on 127.0.0.1.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { spawn } from "node:child_process";
import { delimiter, join } from "node:path";
import type {} from "@koishijs/plugin-mock";
import { COMMAND_MESSAGE_TYPE, instructionText, type CommandMessage } from "../extension/command-channel/instruction-message.ts";
import { finalEventId } from "../extension/notices/notice-rules.ts";
import { localeLanguage, type Language } from "../common/locale.ts";
import { runStandalone } from "../server/standalone/start.ts";
import { ai, latch, makeRoot, startPi, type PiHarness } from "../harness/pi.ts";
import { operatorApi } from "../harness/agent-api.ts";
import { getReceipt } from "../harness/event-client.ts";
import { freePort } from "../harness/koishi.ts";
import { gatedTool } from "../harness/session-commands.ts";
import { makePiHome, PI_CLI, PINNED_NODE, REPO, startStubModel } from "../test/helpers/pi-cli.ts";

const RECIPIENT = { qq: "10001", anonQq: "10002" };

/** The demo's narration and the scripted conversation, in the language of `npm start`'s rule (LC_ALL / LANG). */
const TEXT = {
  "zh-CN": {
    timeout: (what: string) => `演示中断：等待「${what}」超时`,
    step1: "1. 启动独立服务端（notify-webhook + 日志人格，代替 YesImBot 打印它会收到的内容）",
    serverAt: (url: string) => `服务端地址：${url}（临时目录，用完即删）`,
    step2: "2. 启动真实的 Pi 会话（faux 模型脚本作答，不需要 API Key）",
    noPiDir: "Pi 端用环境变量指向这个服务端（ANON_NOTIFY_ENDPOINT / ANON_NOTIFY_TOKEN），不写 ~/.pi。",
    sessionId: (id: string) => `会话 ID：${id}`,
    waitNotice: "完成通知送达",
    step3: "3. 用户在 Pi 中执行 /anon-notify 开启当前会话",
    piSays: (notice: string) => `Pi 提示：${notice}`,
    waitOnline: "会话上线",
    anonSees: (json: string) => `Anon 用 agent_sessions 能看到它：${json}`,
    step4: "4. 用户让 Agent 干活；运行结束后，完成通知送到 Anon 的主对话",
    reply1: "登录页的空指针已经修好，测试全部通过。",
    prompt1: "修复登录页的空指针错误",
    noticeState: (id: string, state: string) => `完成通知 ${id} 的状态：${state}（上面的日志就是人格会收到的事件块）`,
    step5: "5. Anon 决定继续：通过运维接口（与 agent_command 同一服务）发一条指令",
    reply2: "好的，已经给登录页补上了回归测试。",
    instruction1: "顺便给登录页加一个回归测试",
    queued: (id: string, state: string, cancellable: boolean) => `已入队：${id}（状态 ${state}，可撤回：${cancellable ? "是" : "否"}）`,
    arrived: (text: string, ms: string) => `Pi 会话收到可见的指令消息：「${text}」，耗时 ${ms} ms（空闲会话挂着长轮询）`,
    answer: (text: string) => `Agent 的回答：「${text}」`,
    waitAccepted: "指令被确认",
    recorded: (id: string, state: string) => `服务端记录：${id} → ${state}（Pi 先写本地 journal 再 ACK）`,
    alsoNotified: (id: string) => `这次回答的完成通知同样送到了 Anon（上面的日志）：${id}`,
    step6: "6. Agent 忙时又来一条指令，Anon 在它被领取前撤回：它永远不会到达会话",
    reply3: "长任务完成。",
    prompt2: "跑一个很长的任务",
    doomed: "把数据库删掉（这条会被撤回）",
    pending: (id: string, cancellable: boolean) => `Agent 正在执行工具，指令待发：${id}（可撤回：${cancellable ? "是" : "否"}）`,
    cancelled: (json: string) => `撤回结果：${json}`,
    longNotified: (id: string) => `长任务的完成通知也送到了 Anon（上面的日志）：${id}`,
    delivered: (json: string) => `会话里实际收到的指令：${json}`,
    step7: "7. 没有 YesImBot 也行：主人在和机器人的私聊里直接遥控（Koishi 指令；这里由 plugin-mock 模拟聊天）",
    owner: "主人",
    stranger: "陌生人",
    bot: "机器人",
    reply4: "README 的安装步骤已经更新。",
    sendFromChat: "anon.send #1 把 README 的安装步骤更新一下",
    piGot: (text: string) => `Pi 会话收到：「${text}」`,
    chatNotified: (id: string) => `这次的完成通知也送到了 Anon（上面的日志）：${id}`,
    step8: "8. 从聊天新开会话：Agent 的机器上运行着 anon-notify-host，主人用 anon.new 让它在项目里启动 Pi",
    hostRuns: (command: string) => `主机：${command}（这里的 Pi 是真实的 pi 命令行，模型是本机上的桩模型）`,
    newTask: "anon.new shop 给 README 加一节“从聊天开会话”",
    hostReply: "README 已经加上“从聊天开会话”一节。",
    waitHost: "主机注册",
    waitHosted: "新会话的完成通知",
    hostedNotified: (id: string) => `新会话的完成通知也送到了 Anon（上面的日志）：${id}`,
    hostStopped: "主机退出，它启动的会话随之结束（会话文件还在，可以在终端用 pi --session 接着用）。",
    step9: "9. 用户再次执行 /anon-notify 关闭：心跳停止并注销，会话从在线列表消失",
    waitOffline: "会话下线",
    stillThere: "还在吗？",
    refused: (status: number, error: string) => `向离线会话主动发消息：HTTP ${status} ${error}（直接拒绝，不排队）`,
    done: "演示结束，临时目录已清理。",
  },
  "en-US": {
    timeout: (what: string) => `Demo stopped: timed out waiting for "${what}"`,
    step1: "1. Start the standalone server (notify-webhook with the log persona, which prints what YesImBot would receive)",
    serverAt: (url: string) => `Server: ${url} (a temp folder, removed at the end)`,
    step2: "2. Start a real Pi session (a faux model answers from a script; no API key needed)",
    noPiDir: "The Pi side points at this server through environment variables (ANON_NOTIFY_ENDPOINT / ANON_NOTIFY_TOKEN) and writes nothing to ~/.pi.",
    sessionId: (id: string) => `Session id: ${id}`,
    waitNotice: "the completion notice to arrive",
    step3: "3. The user runs /anon-notify in Pi to switch this session on",
    piSays: (notice: string) => `Pi says: ${notice}`,
    waitOnline: "the session to come online",
    anonSees: (json: string) => `Anon sees it with agent_sessions: ${json}`,
    step4: "4. The user gives the agent work; when the run ends, the completion notice reaches Anon's main conversation",
    reply1: "The null pointer on the login page is fixed and all tests pass.",
    prompt1: "Fix the null pointer error on the login page",
    noticeState: (id: string, state: string) => `Completion notice ${id} is ${state} (the log above is the event block the persona receives)`,
    step5: "5. Anon decides to go on: it sends an instruction through the operator API (the same service as agent_command)",
    reply2: "Done: the login page has a regression test now.",
    instruction1: "While you are at it, add a regression test for the login page",
    queued: (id: string, state: string, cancellable: boolean) => `Queued: ${id} (state ${state}, can be cancelled: ${cancellable ? "yes" : "no"})`,
    arrived: (text: string, ms: string) =>
      `The Pi session shows the instruction as a visible message: "${text}", after ${ms} ms (an idle session holds a long poll)`,
    answer: (text: string) => `The agent answers: "${text}"`,
    waitAccepted: "the instruction to be acknowledged",
    recorded: (id: string, state: string) => `The server records: ${id} → ${state} (Pi writes its local journal first, then ACKs)`,
    alsoNotified: (id: string) => `This answer's completion notice reached Anon too (the log above): ${id}`,
    step6: "6. Another instruction arrives while the agent is busy; Anon cancels it before it is claimed, so it never reaches the session",
    reply3: "The long task is done.",
    prompt2: "Run a very long task",
    doomed: "Drop the database (this one will be cancelled)",
    pending: (id: string, cancellable: boolean) =>
      `The agent is running a tool; the instruction waits: ${id} (can be cancelled: ${cancellable ? "yes" : "no"})`,
    cancelled: (json: string) => `Cancelled: ${json}`,
    longNotified: (id: string) => `The long task's completion notice reached Anon too (the log above): ${id}`,
    delivered: (json: string) => `Instructions the session actually received: ${json}`,
    step7: "7. No YesImBot needed: the owner steers from a private chat with the bot (Koishi commands; plugin-mock stands in for the chat here)",
    owner: "Owner",
    stranger: "Stranger",
    bot: "Bot",
    reply4: "The README's install steps are updated.",
    sendFromChat: "anon.send #1 update the install steps in the README",
    piGot: (text: string) => `The Pi session received: "${text}"`,
    chatNotified: (id: string) => `This completion notice reached Anon too (the log above): ${id}`,
    step8: "8. A new session from chat: anon-notify-host runs on the agent's machine, and the owner has it start Pi in a project with anon.new",
    hostRuns: (command: string) => `Host: ${command} (its Pi is the real pi CLI, talking to a stub model on this machine)`,
    newTask: "anon.new shop add a section on starting sessions from chat to the README",
    hostReply: "The README has a section on starting sessions from chat now.",
    waitHost: "the host to register",
    waitHosted: "the new session's completion notice",
    hostedNotified: (id: string) => `The new session's completion notice reached Anon too (the log above): ${id}`,
    hostStopped: "The host exits and ends the session it started (its file stays: pi --session takes it over at the terminal).",
    step9: "9. The user runs /anon-notify again to switch off: heartbeats stop, the session signs off and leaves the online list",
    waitOffline: "the session to go offline",
    stillThere: "Still there?",
    refused: (status: number, error: string) => `A message to the offline session: HTTP ${status} ${error} (refused at once, not queued)`,
    done: "Demo finished; the temp folders are removed.",
  },
} satisfies Record<Language, unknown>;
const language = localeLanguage(process.env);
const T = TEXT[language];

function step(title: string) {
  console.log(`\n━━ ${title} ━━`);
}

function say(text: string) {
  console.log(`  ${text}`);
}

/** Polls an answer until it satisfies `done`; a demo has no assertions, but it must not hang forever. */
async function until<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
  for (let attempt = 0; attempt < 600; attempt++) {
    const value = await check();
    if (value !== undefined) return value;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error(T.timeout(what));
}

function nextCommandMessage(pi: PiHarness): Promise<{ message: CommandMessage; at: number }> {
  return new Promise((resolve) => {
    const off = pi.session.subscribe((event) => {
      if (event.type === "message_start" && event.message.role === "custom" && event.message.customType === COMMAND_MESSAGE_TYPE) {
        off();
        resolve({ message: event.message as unknown as CommandMessage, at: performance.now() });
      }
    });
  });
}

/**
 * Step 8: anon-notify-host (its CLI, as `npx anon-notify-host` runs it) over one project, with a `pi`
 * that is Pi's CLI with this extension and a stub model; the owner starts a session from chat, its
 * completion notice reaches the persona, and the host exits, ending it.
 */
async function hostedSession(
  workDir: string,
  agent: { baseUrl: string; token: string },
  operator: ReturnType<typeof operatorApi>,
  cleanup: (() => unknown)[],
  chat: (text: string) => Promise<string[]>,
) {
  const model = await startStubModel();
  cleanup.unshift(model.close);
  const home = makePiHome(model, join(workDir, "host"));
  const code = join(home.root, "code");
  mkdirSync(join(code, "shop"), { recursive: true });
  const bin = join(home.root, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "pi"), `#!/bin/sh\nexec "${PINNED_NODE}" "${PI_CLI}" -e "${REPO}" "$@"\n`, { mode: 0o755 });
  const env = {
    ...home.env,
    PATH: [bin, home.env.PATH].join(delimiter),
    ANON_NOTIFY_ENDPOINT: `${agent.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: agent.token,
    ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
    ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
  };
  say(T.hostRuns(`npx anon-notify-host --root ${code} --name laptop`));
  const host = spawn(PINNED_NODE, [join(REPO, "host", "cli.ts"), "--root", code, "--name", "laptop"], { env, stdio: ["ignore", "ignore", "pipe"] });
  const exited = new Promise((done) => host.once("close", done));
  cleanup.unshift(() => void host.kill("SIGKILL"));
  let log = "";
  host.stderr.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  await until(T.waitHost, async () => (log.includes("registered as") ? true : undefined));

  model.script({ text: T.hostReply });
  // The reply names the session it became.
  const sessionId = /[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}/.exec((await chat(T.newTask)).join("\n"))?.[0] ?? "";
  const notice = await until(T.waitHosted, async () => {
    const { body } = await operator.audit({ session_id: sessionId, limit: "50" });
    const accepted = (body.entries as { action: string; subject: string | null }[]).find((entry) => entry.action === "event.accepted");
    const receipt = accepted?.subject ? await getReceipt(agent, accepted.subject) : undefined;
    return receipt?.state === "context_injected" ? receipt : undefined;
  });
  say(T.hostedNotified(notice.event_id));
  host.kill("SIGTERM");
  await exited;
  say(T.hostStopped);
}

async function main() {
  const workDir = mkdtempSync(join(tmpdir(), "anon-notify-demo-"));
  const serverDir = join(workDir, "server");
  const cleanup: (() => Promise<void> | void)[] = [() => rmSync(workDir, { recursive: true, force: true })];
  const savedEnv = { ...process.env };
  let finished = false;
  try {
    step(T.step1);
    const port = await freePort();
    const configPath = join(serverDir, "server.json");
    mkdirSync(serverDir, { recursive: true });
    // plugin-mock plays the chat platform, so the owner's private chat can be shown without QQ.
    writeFileSync(
      configPath,
      JSON.stringify({ recipientId: RECIPIENT.qq, botId: `mock:${RECIPIENT.anonQq}`, plugins: { mock: { selfId: RECIPIENT.anonQq } } }),
    );
    // Its own start-up text tells a real user what to write under ~/.pi; the demo needs none of it.
    const server = await runStandalone({ host: "127.0.0.1", port, dataDir: serverDir, configPath }, process.cwd(), { announce: () => {}, language });
    cleanup.unshift(() => server.stop());
    const agentToken = readFileSync(join(serverDir, "token"), "utf8").trim();
    const operatorToken = readFileSync(join(serverDir, "operator.token"), "utf8").trim();
    const agent = { baseUrl: server.baseUrl, token: agentToken };
    const operator = operatorApi(agent, operatorToken);
    say(T.serverAt(server.baseUrl));

    step(T.step2);
    say(T.noPiDir);
    const root = makeRoot();
    cleanup.unshift(() => rmSync(root, { recursive: true, force: true }));
    Object.assign(process.env, {
      PI_CODING_AGENT_DIR: join(root, "agent"),
      ANON_NOTIFY_ENDPOINT: `${server.baseUrl}/events`,
      ANON_NOTIFY_TOKEN: agentToken,
      ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
      ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
    });
    const slow = gatedTool("long_task");
    const pi = await startPi({ root, tools: [slow.tool] });
    cleanup.unshift(() => pi.dispose({ keepRoot: true }));
    const sessionId = pi.session.sessionManager.getSessionId();
    say(T.sessionId(sessionId));
    // Each step waits for the completion notice it causes, so the persona's log lines stay in their step.
    const lastFinalId = () => {
      const reply = pi.session.sessionManager
        .getBranch()
        .filter((e) => e.type === "message" && e.message.role === "assistant")
        .at(-1)!;
      return finalEventId(sessionId, reply.id, "completed");
    };
    const injected = (eventId: string) =>
      until(T.waitNotice, async () => {
        const current = await getReceipt(agent, eventId);
        return current?.state === "context_injected" ? current : undefined;
      });

    step(T.step3);
    await pi.prompt("/anon-notify");
    for (const notice of pi.notices()) say(T.piSays(notice));
    const online = await until(T.waitOnline, async () => {
      const { body } = await operator.sessions();
      return body.sessions.find((s: { session_id: string }) => s.session_id === sessionId);
    });
    say(T.anonSees(JSON.stringify(online)));

    step(T.step4);
    pi.script([ai.fauxAssistantMessage(T.reply1)]);
    await pi.prompt(T.prompt1);
    const noticeId = lastFinalId();
    const receipt = await injected(noticeId);
    say(T.noticeState(receipt.event_id, receipt.state));

    step(T.step5);
    pi.script([ai.fauxAssistantMessage(T.reply2)]);
    const arrived = nextCommandMessage(pi);
    const sentAt = performance.now();
    const created = await operator.create({ session_id: sessionId, event_id: noticeId, instruction: T.instruction1 });
    say(T.queued(created.body.command.command_id, created.body.command.state, created.body.command.cancellable));
    const { message, at } = await arrived;
    say(T.arrived(instructionText(message.content), (at - sentAt).toFixed(1)));
    await pi.session.waitForIdle();
    const answer = pi.session.sessionManager
      .getBranch()
      .filter((e) => e.type === "message" && e.message.role === "assistant")
      .at(-1)!;
    say(T.answer((answer as { message: { content: { text?: string }[] } }).message.content.map((c) => c.text ?? "").join("")));
    const accepted = await until(T.waitAccepted, async () => {
      const { body } = await operator.list(sessionId);
      const found = body.commands.find((c: { command_id: string }) => c.command_id === created.body.command.command_id);
      return found?.state === "accepted" ? found : undefined;
    });
    say(T.recorded(accepted.command_id, accepted.state));
    say(T.alsoNotified((await injected(lastFinalId())).event_id));

    step(T.step6);
    const toolStarted = latch();
    void slow.started.then(toolStarted.signal);
    pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("long_task", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage(T.reply3)]);
    const busyRun = pi.prompt(T.prompt2);
    await toolStarted.promise;
    // A moment later, as a person would: the session withdrew its idle claim when the run started,
    // and the server should have seen that request go before the next instruction arrives.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const doomed = await operator.create({ session_id: sessionId, instruction: T.doomed });
    say(T.pending(doomed.body.command.command_id, doomed.body.command.cancellable));
    const cancel = await operator.cancel(doomed.body.command.command_id, sessionId);
    say(T.cancelled(JSON.stringify(cancel.body)));
    slow.release();
    await busyRun;
    await pi.session.waitForIdle();
    say(T.longNotified((await injected(lastFinalId())).event_id));
    const delivered = pi.session.sessionManager
      .getEntries()
      .filter((e) => e.type === "custom_message" && e.customType === COMMAND_MESSAGE_TYPE)
      .map((e) => instructionText((e as unknown as CommandMessage).content));
    say(T.delivered(JSON.stringify(delivered)));
    const { body: list } = await operator.list(sessionId);
    for (const c of list.commands) say(`  ${c.command_id}  ${c.state.padEnd(9)} ${c.preview}`);

    step(T.step7);
    const owner = server.app.mock.client(RECIPIENT.qq);
    const chat = async (client: typeof owner, who: string, text: string) => {
      say(`${who}${language === "zh-CN" ? "：" : ": "}${text}`);
      const replies = await client.receive(text);
      for (const reply of replies) say(`${T.bot}${language === "zh-CN" ? "：" : ": "}${reply.replace(/\n/g, "\n          ")}`);
      return replies;
    };
    await chat(owner, T.owner, "anon.sessions");
    pi.script([ai.fauxAssistantMessage(T.reply4)]);
    const fromChat = nextCommandMessage(pi);
    await chat(owner, T.owner, T.sendFromChat);
    const { message: chatMessage } = await fromChat;
    say(T.piGot(instructionText(chatMessage.content)));
    await pi.session.waitForIdle();
    // Handed over before the mute below, which would otherwise hold it for the digest.
    say(T.chatNotified((await injected(lastFinalId())).event_id));
    await chat(owner, T.owner, "anon.mute 30m");
    await chat(owner, T.owner, "anon.status");
    await chat(owner, T.owner, "anon.unmute");
    await chat(server.app.mock.client("20002"), T.stranger, "anon.sessions");

    step(T.step8);
    await hostedSession(workDir, agent, operator, cleanup, (text) => chat(owner, T.owner, text));

    step(T.step9);
    await pi.prompt("/anon-notify");
    await until(T.waitOffline, async () => ((await operator.sessions()).body.sessions.length === 0 ? true : undefined));
    const refused = await operator.create({ session_id: sessionId, instruction: T.stillThere });
    say(T.refused(refused.status, refused.body.error));
    finished = true;
  } finally {
    for (const step of cleanup) await step();
    process.env = savedEnv;
  }
  // Last, once Pi and the server are gone: nothing of theirs can print after it.
  if (finished) console.log(`\n${T.done}`);
}

await main();
