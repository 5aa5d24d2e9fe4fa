/**
 * `npm run demo`: the whole loop on a fresh clone, no API key, nothing left behind. It starts the
 * standalone notify-webhook server (log persona) and a real Pi session driven by pi-ai's faux
 * model, switches the session on, lets a run finish (the completion notice reaches the persona),
 * sends an instruction through the operator API (it reaches the session and is answered), and
 * cancels one that then never arrives; then the owner does the same from a private chat with the
 * bot (plugin-mock stands in for QQ). Everything runs in a temp folder on 127.0.0.1.
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type {} from "@koishijs/plugin-mock";
import { COMMAND_MESSAGE_TYPE, instructionText, type CommandMessage } from "../extension/commands/message.ts";
import { finalEventId } from "../extension/notices/notice.ts";
import { runStandalone } from "../server/standalone.ts";
import { ai, latch, makeRoot, startPi, type PiHarness } from "../harness/pi.ts";
import { operatorApi } from "../harness/agent-api.ts";
import { getReceipt } from "../harness/event-client.ts";
import { freePort } from "../harness/koishi.ts";
import { gatedTool } from "../harness/session-commands.ts";

const RECIPIENT = { qq: "10001", anonQq: "10002" };

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
  throw new Error(`演示中断：等待「${what}」超时`);
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

async function main() {
  const workDir = mkdtempSync(join(tmpdir(), "anon-notify-demo-"));
  const serverDir = join(workDir, "server");
  const cleanup: (() => Promise<void> | void)[] = [() => rmSync(workDir, { recursive: true, force: true })];
  const savedEnv = { ...process.env };
  let finished = false;
  try {
    step("1. 启动独立服务端（notify-webhook + 日志人格，代替 YesImBot 打印它会收到的内容）");
    const port = await freePort();
    const configPath = join(serverDir, "server.json");
    mkdirSync(serverDir, { recursive: true });
    // plugin-mock plays the chat platform, so the owner's private chat can be shown without QQ.
    writeFileSync(configPath, JSON.stringify({ recipientId: RECIPIENT.qq, botId: `mock:${RECIPIENT.anonQq}`, plugins: { mock: { selfId: RECIPIENT.anonQq } } }));
    // Its own start-up text tells a real user what to write under ~/.pi; the demo needs none of it.
    const server = await runStandalone({ host: "127.0.0.1", port, dataDir: serverDir, configPath }, process.cwd(), { announce: () => {} });
    cleanup.unshift(() => server.stop());
    const agentToken = readFileSync(join(serverDir, "token"), "utf8").trim();
    const operatorToken = readFileSync(join(serverDir, "operator.token"), "utf8").trim();
    const agent = { baseUrl: server.baseUrl, token: agentToken };
    const operator = operatorApi(agent, operatorToken);
    say(`服务端地址：${server.baseUrl}（临时目录，用完即删）`);

    step("2. 启动真实的 Pi 会话（faux 模型脚本作答，不需要 API Key）");
    say("Pi 端用环境变量指向这个服务端（ANON_NOTIFY_ENDPOINT / ANON_NOTIFY_TOKEN），不写 ~/.pi。");
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
    say(`会话 ID：${sessionId}`);
    // Each step waits for the completion notice it causes, so the persona's log lines stay in their step.
    const lastFinalId = () => {
      const reply = pi.session.sessionManager.getBranch().filter((e) => e.type === "message" && e.message.role === "assistant").at(-1)!;
      return finalEventId(sessionId, reply.id, "completed");
    };
    const injected = (eventId: string) =>
      until("完成通知送达", async () => {
        const current = await getReceipt(agent, eventId);
        return current?.state === "context_injected" ? current : undefined;
      });

    step("3. 用户在 Pi 中执行 /anon-notify 开启当前会话");
    await pi.prompt("/anon-notify");
    for (const notice of pi.notices()) say(`Pi 提示：${notice}`);
    const online = await until("会话上线", async () => {
      const { body } = await operator.sessions();
      return body.sessions.find((s: { session_id: string }) => s.session_id === sessionId);
    });
    say(`Anon 用 agent_sessions 能看到它：${JSON.stringify(online)}`);

    step("4. 用户让 Agent 干活；运行结束后，完成通知送到 Anon 的主对话");
    pi.script([ai.fauxAssistantMessage("登录页的空指针已经修好，测试全部通过。")]);
    await pi.prompt("修复登录页的空指针错误");
    const noticeId = lastFinalId();
    const receipt = await injected(noticeId);
    say(`完成通知 ${receipt.event_id} 的状态：${receipt.state}（上面的日志就是人格会收到的事件块）`);

    step("5. Anon 决定继续：通过运维接口（与 agent_command 同一服务）发一条指令");
    pi.script([ai.fauxAssistantMessage("好的，已经给登录页补上了回归测试。")]);
    const arrived = nextCommandMessage(pi);
    const sentAt = performance.now();
    const created = await operator.create({ session_id: sessionId, event_id: noticeId, instruction: "顺便给登录页加一个回归测试" });
    say(`已入队：${created.body.command.command_id}（状态 ${created.body.command.state}，可撤回：${created.body.command.cancellable}）`);
    const { message, at } = await arrived;
    say(`Pi 会话收到可见的指令消息：「${instructionText(message.content)}」，耗时 ${(at - sentAt).toFixed(1)} ms（空闲会话挂着长轮询）`);
    await pi.session.waitForIdle();
    const answer = pi.session.sessionManager.getBranch().filter((e) => e.type === "message" && e.message.role === "assistant").at(-1)!;
    say(`Agent 的回答：「${(answer as { message: { content: { text?: string }[] } }).message.content.map((c) => c.text ?? "").join("")}」`);
    const accepted = await until("指令被确认", async () => {
      const { body } = await operator.list(sessionId);
      const found = body.commands.find((c: { command_id: string }) => c.command_id === created.body.command.command_id);
      return found?.state === "accepted" ? found : undefined;
    });
    say(`服务端记录：${accepted.command_id} → ${accepted.state}（Pi 先写本地 journal 再 ACK）`);
    say(`这次回答的完成通知同样送到了 Anon（上面的日志）：${(await injected(lastFinalId())).event_id}`);

    step("6. Agent 忙时又来一条指令，Anon 在它被领取前撤回：它永远不会到达会话");
    const toolStarted = latch();
    void slow.started.then(toolStarted.signal);
    pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("long_task", {})], { stopReason: "toolUse" }), ai.fauxAssistantMessage("长任务完成。")]);
    const busyRun = pi.prompt("跑一个很长的任务");
    await toolStarted.promise;
    // A moment later, as a person would: the session withdrew its idle claim when the run started,
    // and the server should have seen that request go before the next instruction arrives.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const doomed = await operator.create({ session_id: sessionId, instruction: "把数据库删掉（这条会被撤回）" });
    say(`Agent 正在执行工具，指令待发：${doomed.body.command.command_id}（可撤回：${doomed.body.command.cancellable}）`);
    const cancel = await operator.cancel(doomed.body.command.command_id, sessionId);
    say(`撤回结果：${JSON.stringify(cancel.body)}`);
    slow.release();
    await busyRun;
    await pi.session.waitForIdle();
    say(`长任务的完成通知也送到了 Anon（上面的日志）：${(await injected(lastFinalId())).event_id}`);
    const delivered = pi.session.sessionManager
      .getEntries()
      .filter((e) => e.type === "custom_message" && e.customType === COMMAND_MESSAGE_TYPE)
      .map((e) => instructionText((e as unknown as CommandMessage).content));
    say(`会话里实际收到的指令：${JSON.stringify(delivered)}`);
    const { body: list } = await operator.list(sessionId);
    for (const c of list.commands) say(`  ${c.command_id}  ${c.state.padEnd(9)} ${c.preview}`);

    step("7. 没有 YesImBot 也行：主人在和机器人的私聊里直接遥控（Koishi 指令；这里由 plugin-mock 模拟聊天）");
    const owner = server.app.mock.client(RECIPIENT.qq);
    const chat = async (client: typeof owner, who: string, text: string) => {
      say(`${who}：${text}`);
      for (const reply of await client.receive(text)) say(`机器人：${reply.replace(/\n/g, "\n          ")}`);
    };
    await chat(owner, "主人", "anon.sessions");
    pi.script([ai.fauxAssistantMessage("README 的安装步骤已经更新。")]);
    const fromChat = nextCommandMessage(pi);
    await chat(owner, "主人", "anon.send #1 把 README 的安装步骤更新一下");
    const { message: chatMessage } = await fromChat;
    say(`Pi 会话收到：「${instructionText(chatMessage.content)}」`);
    await pi.session.waitForIdle();
    // Handed over before the mute below, which would otherwise hold it for the digest.
    say(`这次的完成通知也送到了 Anon（上面的日志）：${(await injected(lastFinalId())).event_id}`);
    await chat(owner, "主人", "anon.mute 30m");
    await chat(owner, "主人", "anon.status");
    await chat(owner, "主人", "anon.unmute");
    await chat(server.app.mock.client("20002"), "陌生人", "anon.sessions");

    step("8. 用户再次执行 /anon-notify 关闭：心跳停止并注销，会话从在线列表消失");
    await pi.prompt("/anon-notify");
    await until("会话下线", async () => ((await operator.sessions()).body.sessions.length === 0 ? true : undefined));
    const refused = await operator.create({ session_id: sessionId, instruction: "还在吗？" });
    say(`向离线会话主动发消息：HTTP ${refused.status} ${refused.body.error}（直接拒绝，不排队）`);
    finished = true;
  } finally {
    for (const step of cleanup) await step();
    process.env = savedEnv;
  }
  // Last, once Pi and the server are gone: nothing of theirs can print after it.
  if (finished) console.log("\n演示结束，临时目录已清理。");
}

await main();
