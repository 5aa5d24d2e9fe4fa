/**
 * anon-notify: tells Anon (a YesImBot persona) when a Pi run completes or fails, for the sessions
 * the user switched on with `/anon-notify`. Wiring only: Pi events become run facts (lifecycle.ts),
 * settled runs become notices (notice.ts), notices go to the notifier (delivery.ts), activation
 * lives in the session file (activation.ts). Handlers record and enqueue; none awaits the network.
 */
import { randomUUID } from "node:crypto";
import { basename, join } from "node:path";
import { debuglog } from "node:util";
import type {
  AgentSettledEvent,
  ExtensionAPI,
  ExtensionContext,
  SessionStartEvent,
} from "@mariozechner/pi-coding-agent";
import {
  ACTIVATION_CUSTOM_TYPE,
  ACTIVATION_VERSION,
  SUBAGENT_ENV,
  SUBAGENT_FLAG,
  USAGE_TEXT,
  enableVerdict,
  isSubagent,
  readActivation,
  readActivationFromFile,
  type ActivationRecord,
  type RecipientCheck,
} from "./activation.ts";
import { agentDirFrom, dataDirFor, loadConfig, readToken, recipientProblem, renderSource, type Config } from "./config.ts";
import { createNotifier, createWebhookClient, type Notifier, type SendOptions, type WebhookClient } from "./delivery.ts";
import {
  classifyRun,
  progressDue,
  startRun,
  toolErrorDue,
  withAbort,
  withAssistant,
  withAssistantEntry,
  withBeforeSettle,
  withLowLevelStart,
  withTask,
  withToolEnd,
  type ProgressMark,
  type RunFacts,
} from "./lifecycle.ts";
import { externalNotice, finalNotice, sampleContextUsage, transientNotice, type NoticeContext } from "./notice.ts";
import { openOutbox, type Outbox } from "./outbox.ts";
import { installSink } from "./sink/index.ts";
import { createRuntimeId, installPresence } from "./presence.ts";
import { installCommandChannel } from "./commands.ts";
import { swallowedByFlag, swallowedPromptMessage } from "./subagent-flag.ts";
import { installProgressTool, type ProgressTarget } from "./progress-tool.ts";
import { RecipientAnswer, type EventBody } from "./protocol.ts";
import {
  SEND_CHANNEL,
  STATE_CHANNEL,
  STATUS_KEY,
  SendRequest,
  servicesEnabled,
  sessionStatus,
  statusText,
  type SessionFacts,
  type StatePayload,
} from "./state-bus.ts";

/** Reload and quit wait this long for notices in flight; unsent finals stay in the outbox. */
export const SHUTDOWN_FLUSH_MS = 3_000;
/** `/anon-notify` waits this long for the server's recipient status before enabling unverified. */
export const RECIPIENT_CHECK_TIMEOUT_MS = 5_000;

/**
 * Something that runs only while the session is active (heartbeats, the command channel):
 * started after activation is persisted, stopped on deactivation and at session shutdown.
 */
export interface SessionService {
  start(ctx: ExtensionContext): void;
  stop(): Promise<void>;
}

const debug = debuglog("anon-notify");

/** Everything that belongs to one bound session; replaced at every session_start. */
interface SessionState {
  ctx: ExtensionContext;
  sessionId: string;
  config: Config | undefined;
  configState: SessionFacts["config"];
  tokenConfigured: boolean;
  subagent: boolean;
  active: boolean;
  /** What the server said about the recipient when this runtime enabled the session. */
  recipientNote: string | null;
  delivery: { client: WebhookClient; notifier: Notifier; outbox: Outbox } | undefined;
  servicesRunning: boolean;
}

interface RunState {
  facts: RunFacts;
  /** The started notice waits for the run's first request, so it can name the task. */
  startAnnounced: boolean;
  progress: ProgressMark | null;
  lastToolErrorAt: number | null;
}

export default function anonNotify(pi: ExtensionAPI): void {
  const swallowed = swallowedByFlag(process.argv.slice(2), SUBAGENT_FLAG);
  if (swallowed !== undefined) throw new Error(swallowedPromptMessage(SUBAGENT_FLAG, swallowed, SUBAGENT_ENV));
  pi.registerFlag(SUBAGENT_FLAG, {
    type: "boolean",
    default: false,
    description: "Never send anon-notify notices from this Pi process (set by parents that spawn subagents)",
  });
  const runtimeId = createRuntimeId();
  const services: SessionService[] = [];
  let state: SessionState | undefined;
  // Set first at session_start, so problems found while starting reach the user's UI too.
  let reportCtx: ExtensionContext | undefined;
  let run: RunState | undefined;
  let progressTimer: ReturnType<typeof setInterval> | undefined;
  let transientSequence = 0;

  // ── Reporting ───────────────────────────────────────────────────────────────

  const report = (message: string, level: "info" | "warning" | "error" = "warning") => {
    try {
      if (reportCtx?.hasUI) return reportCtx.ui.notify(message, level);
    } catch {
      // A stale ctx after replacement; stderr still reaches the user.
    }
    if (level !== "info") process.stderr.write(`[anon-notify] ${message}\n`);
  };

  const notifying = (): boolean => !!state && servicesEnabled(facts(state)) && !!state.delivery;

  // Heartbeats and the command channel: started and stopped through the services seam below.
  const connection = () => (state?.config && state.delivery ? { client: state.delivery.client, config: state.config } : undefined);
  const presence = installPresence(pi, { runtimeId, connection, report });
  services.push(presence, installCommandChannel(pi, { presence, runtimeId, connection, report }));
  // The opt-in report_progress tool: offered only while this session is an active main agent.
  services.push(
    installProgressTool(pi, {
      offered: () => state?.config?.progressTool.enabled === true,
      target: (): ProgressTarget => {
        const s = state;
        if (s?.config && s.delivery && notifying()) {
          return { kind: "ready", notifier: s.delivery.notifier, client: s.delivery.client, context: noticeContext(s, s.config), task: run?.facts.task ?? "" };
        }
        const recorder = s?.delivery ? { client: s.delivery.client, context: { sessionId: s.sessionId, runtimeId, now: new Date() } } : {};
        return { kind: "unavailable", why: s?.subagent ? "subagent" : "inactive", ...recorder };
      },
      report,
    }),
  );

  const facts = (s: SessionState): SessionFacts => ({ sessionActive: s.active, subagent: s.subagent, config: s.configState });

  /** Memory is the last to change: status bar, state bus and services follow it. */
  const publish = (s: SessionState) => {
    const status = sessionStatus(facts(s));
    if (s.ctx.hasUI) {
      s.ctx.ui.setStatus(STATUS_KEY, statusText(status, s.config ? { qq: s.config.recipient.qq, note: s.recipientNote } : null));
    }
    const payload: StatePayload = {
      version: 1,
      sessionId: s.sessionId,
      status,
      sessionActive: s.active,
      servicesEnabled: servicesEnabled(facts(s)),
      tokenConfigured: s.tokenConfigured,
    };
    pi.events.emit(STATE_CHANNEL, payload);
  };

  const syncServices = async (s: SessionState) => {
    const wanted = servicesEnabled(facts(s));
    if (wanted === s.servicesRunning) return;
    s.servicesRunning = wanted;
    if (wanted) for (const service of services) service.start(s.ctx);
    else await Promise.all(services.map((service) => service.stop()));
  };

  // ── Notices ─────────────────────────────────────────────────────────────────

  const noticeContext = (s: SessionState, config: Config): NoticeContext => {
    const model = s.ctx.model;
    const project = basename(s.ctx.cwd);
    return {
      sessionId: s.sessionId,
      runtimeId,
      project,
      source: renderSource(config.source, {
        project,
        cwd: s.ctx.cwd,
        sessionId: s.sessionId,
        model: model ? `${model.provider}/${model.id}` : null,
        mode: s.ctx.mode,
      }),
      content: config.content,
      contextUsage: sampleContextUsage(() => s.ctx.getContextUsage()),
      now: new Date(),
    };
  };

  /**
   * Pi awaits handlers (agent_settled before prompt() resolves), and handing a notice to the
   * notifier validates it and starts the outbox write: so the hand-over runs just after the handler,
   * in order, off Pi's path. session_shutdown drains what is still waiting before it flushes.
   */
  const handOver: (() => void)[] = [];
  let handOverTimer: ReturnType<typeof setImmediate> | undefined;
  const drainHandOver = () => {
    if (handOverTimer) clearImmediate(handOverTimer);
    handOverTimer = undefined;
    for (const send of handOver.splice(0)) send();
  };
  const enqueue = (notifier: Notifier, event: EventBody, options: SendOptions) => {
    handOver.push(() => notifier.send(event, options));
    handOverTimer ??= setImmediate(drainHandOver);
  };

  const sendTransient = (status: "started" | "progress" | "tool_error", summary: string) => {
    if (!notifying() || !state?.config || !state.delivery || !run) return;
    transientSequence += 1;
    const event = transientNotice(status, summary, run.facts, transientSequence, noticeContext(state, state.config));
    enqueue(state.delivery.notifier, event, { final: false });
  };

  const checkProgress = () => {
    const config = state?.config;
    if (!run || !config || !notifying()) return;
    const now = Date.now();
    if (!progressDue(run.facts, run.progress, now, { ...config.progress, progress: config.notify.progress })) return;
    run.progress = { at: now, toolCalls: run.facts.toolCalls };
    const minutes = Math.floor((now - run.facts.startedAt) / 60_000);
    sendTransient("progress", `仍在运行：已用 ${minutes} 分钟，已完成 ${run.facts.toolCalls} 次工具调用。`);
  };

  const stopProgressTimer = () => {
    if (progressTimer) clearInterval(progressTimer);
    progressTimer = undefined;
  };

  // ── Session lifecycle ───────────────────────────────────────────────────────

  /**
   * Appends an activation record; on failure returns why, after recording `fallbackActive` behind
   * it: Pi 0.87.1 keeps an entry whose write failed in memory, where a reload would find it (1.x
   * rolls back, and then the second append fails too, which is as consistent).
   */
  const writeActivation = (record: ActivationRecord, fallbackActive: boolean): string | undefined => {
    try {
      pi.appendEntry(ACTIVATION_CUSTOM_TYPE, record);
      return undefined;
    } catch (error) {
      try {
        pi.appendEntry(ACTIVATION_CUSTOM_TYPE, { ...record, active: fallbackActive });
      } catch {
        // The file is still unwritable: nothing more to keep consistent.
      }
      return (error as Error).message;
    }
  };

  /** Fork and clone inherit the source's current session-wide value and record it as a snapshot. */
  const inherit = (event: SessionStartEvent, ctx: ExtensionContext, copied: ReturnType<typeof readActivation>) => {
    const source = event.previousSessionFile ?? ctx.sessionManager.getHeader()?.parentSession;
    const reading = (source ? readActivationFromFile(source) : undefined) ?? copied;
    const failure = writeActivation({ version: ACTIVATION_VERSION, active: reading.active, via: "inherit" }, false);
    if (!failure) return reading.active;
    report(`无法写入继承的 Anon 通知状态，此会话按未开启处理：${failure}`, "error");
    return false;
  };

  const openDelivery = (config: Config, token: string | undefined): SessionState["delivery"] => {
    try {
      const outbox = openOutbox(join(dataDirFor(agentDirFrom(process.env)), "outbox"), { warn: (m) => report(m) });
      const client = createWebhookClient({ endpoint: config.endpoint, token, timeoutMs: config.delivery.timeoutMs });
      const notifier = createNotifier({
        client,
        outbox,
        delivery: config.delivery,
        log: { info: (m) => report(m, "info"), warn: (m) => report(m), debug },
      });
      return { client, notifier, outbox };
    } catch (error) {
      report(`Anon 通知无法启动发送：${(error as Error).message}`, "error");
      return undefined;
    }
  };

  pi.on("session_start", (event, ctx) => {
    reportCtx = ctx;
    const loaded = loadConfig({ cwd: ctx.cwd, env: process.env, projectTrusted: ctx.isProjectTrusted() });
    const config = loaded.ok ? loaded.config : undefined;
    let token: string | undefined;
    let configState: SessionFacts["config"] = !loaded.ok ? "invalid" : loaded.config.enabled ? "valid" : "disabled";
    if (loaded.ok) {
      for (const warning of loaded.warnings) report(warning);
      try {
        token = readToken(loaded.config, process.env);
      } catch (error) {
        report((error as Error).message, "error");
        configState = "invalid";
      }
    } else {
      report(`Anon 通知配置无效，扩展保持未生效：\n${loaded.errors.join("\n")}`, "error");
    }
    const subagent = isSubagent(
      {
        mode: ctx.mode,
        sessionFile: ctx.sessionManager.getSessionFile(),
        optOutFlag: pi.getFlag(SUBAGENT_FLAG) === true,
        env: process.env,
      },
      config?.mainAgentOnly ?? true,
    );
    // Restored from all entries on every start: the reason cannot tell new from resumed.
    const reading = readActivation(ctx.sessionManager.getEntries());
    if (reading.record === "invalid") report(`会话中的 Anon 通知记录无效（${reading.problem}），按未开启处理。`);
    const active = event.reason === "fork" ? inherit(event, ctx, reading) : reading.active;

    state = {
      ctx,
      sessionId: ctx.sessionManager.getSessionId(),
      config,
      configState,
      tokenConfigured: token !== undefined,
      subagent,
      active,
      recipientNote: null,
      delivery: config && configState === "valid" && !subagent ? openDelivery(config, token) : undefined,
      servicesRunning: false,
    };
    publish(state);
    // The desktop channel has its own gate (sink.enabled), not the session's activation.
    if (config) installSink(pi, config.sink, { isSubagent: () => subagent, warn: (message) => report(message) });
    void syncServices(state);
    // Finals left by a crash or an outage, from any session: sent in the background, oldest first.
    void state.delivery?.notifier.resendOutbox();
  });

  pi.on("session_shutdown", async () => {
    // Every shutdown reason is a user or session operation: never a notice, and no inactive record.
    stopProgressTimer();
    run = undefined;
    const s = state;
    state = undefined;
    if (!s) return;
    s.active = false;
    drainHandOver();
    await syncServices(s);
    if (s.delivery) {
      await s.delivery.notifier.flush(SHUTDOWN_FLUSH_MS);
      await s.delivery.notifier.close();
      await s.delivery.client.close();
      await s.delivery.outbox.close();
    }
  });

  // ── Run facts (recorded whether or not the session is active) ───────────────

  pi.on("agent_start", (_event, ctx) => {
    const first = !run;
    run ??= { facts: startRun(Date.now()), startAnnounced: false, progress: null, lastToolErrorAt: null };
    run.facts = withLowLevelStart(run.facts);
    // Esc and ctx.abort() abort this run's signal; a retry gets a new one, hence per low-level run.
    ctx.signal?.addEventListener("abort", () => run && (run.facts = withAbort(run.facts)), { once: true });
    if (!first) return;
    const config = state?.config;
    if (config?.notify.progress && notifying()) {
      progressTimer = setInterval(checkProgress, Math.min(config.progress.firstAfterMs, config.progress.intervalMs));
      progressTimer.unref();
    }
  });

  pi.on("message_end", (event) => {
    if (!run) return;
    const message = event.message as { role: string; content?: unknown; stopReason?: string; errorMessage?: string };
    const blocks = Array.isArray(message.content) ? (message.content as { type: string; text?: string }[]) : [];
    const text = typeof message.content === "string" ? message.content : blocks.filter((b) => b.type === "text").map((b) => b.text ?? "").join("\n");
    if (message.role === "user" || message.role === "custom") {
      run.facts = withTask(run.facts, text);
      if (!run.startAnnounced && state?.config?.notify.started) sendTransient("started", "开始处理任务。");
      run.startAnnounced = true;
    } else if (message.role === "assistant") {
      run.facts = withAssistant(run.facts, {
        stopReason: message.stopReason ?? "stop",
        errorMessage: message.errorMessage ?? null,
        text,
        entryId: null,
        toolCalls: blocks.filter((b) => b.type === "toolCall").length,
      });
    }
  });

  pi.on("tool_execution_end", (event) => {
    if (!run) return;
    // `terminate` is not persisted on the tool result message: this is the only place to see it.
    const result = event.result as { terminate?: unknown; content?: { type: string; text?: string }[] } | undefined;
    run.facts = withToolEnd(run.facts, { terminate: result?.terminate === true, isError: event.isError });
    const config = state?.config;
    if (event.isError && config && toolErrorDue(config.notify.toolError, run.lastToolErrorAt, Date.now(), config.progress.errorCooldownMs)) {
      run.lastToolErrorAt = Date.now();
      const detail = result?.content?.find((c) => c.type === "text")?.text ?? "";
      sendTransient("tool_error", `工具 ${event.toolName} 出错${detail ? `：${detail}` : "。"}`);
    }
    checkProgress();
  });

  pi.on("turn_end", (event, ctx) => {
    if (!run) return;
    if (ctx.signal?.aborted) run.facts = withAbort(run.facts);
    run.facts = withAssistantEntry(run.facts, event.messageEntryId);
  });

  pi.on("agent_end", (_event, ctx) => {
    if (run && ctx.signal?.aborted) run.facts = withAbort(run.facts);
  });

  pi.on("agent_before_settle", () => {
    if (run) run.facts = withBeforeSettle(run.facts);
  });

  // agent_end is not final (retry, compaction or queued work may follow); agent_settled is, once per run.
  pi.on("agent_settled", (event) => {
    const finished = run;
    run = undefined;
    stopProgressTimer();
    if (!finished || !state?.config || !state.delivery || !notifying()) return;
    const aborted = (event as AgentSettledEvent & { aborted?: unknown }).aborted;
    const outcome = classifyRun(finished.facts, typeof aborted === "boolean" ? aborted : undefined);
    if (outcome.kind === "completed" && !state.config.notify.completed) return;
    if (outcome.kind === "failed" && !state.config.notify.failed) return;
    const notice = finalNotice(outcome, finished.facts, noticeContext(state, state.config));
    if (notice) enqueue(state.delivery.notifier, notice, { final: true });
  });

  // ── Other extensions ────────────────────────────────────────────────────────

  pi.events.on(SEND_CHANNEL, (data) => {
    let parsed: ReturnType<typeof SendRequest.safeParse>;
    try {
      parsed = SendRequest.safeParse(data);
    } catch (error) {
      // A hostile payload (throwing getter, revoked Proxy) throws inside zod itself.
      return report(`另一个扩展的 anon-notify:send 请求无法读取，已忽略：${(error as Error)?.message ?? String(error)}`);
    }
    if (!parsed.success) {
      const issues = parsed.error.issues.map((i) => `${i.path.join(".") || "(payload)"}: ${i.message}`).join("; ");
      return report(`另一个扩展的 anon-notify:send 请求无效，已忽略：${issues}`);
    }
    if (!state?.config || !state.delivery || !notifying()) return debug("anon-notify:send ignored: session not active");
    const notice = externalNotice(parsed.data, randomUUID(), noticeContext(state, state.config));
    // An explicit request, not a progress report: the progress interval does not hold it back.
    enqueue(state.delivery.notifier, notice, { final: notice.status === "completed" || notice.status === "failed", throttled: false });
  });

  // ── The command ─────────────────────────────────────────────────────────────

  const checkRecipient = async (client: WebhookClient): Promise<RecipientCheck> => {
    try {
      const answer = await client.request("GET", "recipient", { schema: RecipientAnswer, timeoutMs: RECIPIENT_CHECK_TIMEOUT_MS });
      return { kind: "answer", status: answer.status, reason: answer.reason };
    } catch (error) {
      return { kind: "network_error", message: (error as Error).message };
    }
  };

  /** Why this session cannot be switched on, or the note and warning to enable it with. */
  const enablePreflight = async (s: SessionState): Promise<{ refuse: string } | { note: string; warning: string | null }> => {
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
  };

  pi.registerCommand("anon-notify", {
    description: "开启或关闭当前会话的 Anon 通知（不带参数）",
    handler: async (args: string) => {
      if (args.trim() !== "") return report(USAGE_TEXT, "warning");
      const s = state;
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
      const failure = writeActivation(record, s.active);
      if (failure) return report(`无法写入会话文件，Anon 通知状态未改变：${failure}`, "error");
      if (state !== s) return; // the session was replaced while the server was asked
      s.active = next;
      s.recipientNote = enabled?.note ?? null;
      publish(s);
      await syncServices(s);
      if (enabled?.warning) report(enabled.warning, "warning");
      report(next ? `已开启当前会话的 Anon 通知（目标 QQ ${s.config?.recipient.qq}）。` : "已关闭当前会话的 Anon 通知。", "info");
    },
  });
}
