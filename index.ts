/** anon-notify's Pi entry, wiring only: the session, the run recorder and its observers, and the services
 * an active session runs. Handlers record and enqueue; none awaits the network. */
import { debuglog } from "node:util";
import type { ExtensionAPI, ExtensionContext, SessionStartEvent } from "@earendil-works/pi-coding-agent";
import { APPROVALS_FLAG, quotedPrompt, START_ON_FLAG, SUBAGENT_ENV, SUBAGENT_FLAG, swallowedByFlag } from "./activation.ts";
import { installCommandChannel } from "./commands.ts";
import { stoppedRun } from "./extension/command-channel/control-rules.ts";
import { LIMITS } from "./protocol/wire.ts";
import { ApprovalGate } from "./extension/approvals/gate.ts";
import { createHandOver, handOverRequest, installSendChannel, type HandOver } from "./extension/notices/hand-over.ts";
import { installProgressTool } from "./extension/notices/progress-tool.ts";
import { RunNotices } from "./extension/notices/run-notices.ts";
import { messagesFor, type Messages } from "./extension/texts/messages.ts";
import { loadConfig } from "./extension/config/config.ts";
import { createRuntimeId, Presence } from "./extension/presence/presence.ts";
import { ServerFacts } from "./extension/server-client/server-facts.ts";
import { runRecorderFor, type RunRecorder } from "./extension/run-recorder.ts";
import { CurrentSession } from "./extension/session/current.ts";
import { createReporter, type Report } from "./extension/session/report.ts";
import {
  closeSession,
  explainFailure,
  inputsChanged,
  notifying,
  openSession,
  publish,
  syncServices,
  type SessionService,
  type SessionState,
} from "./extension/session/session.ts";
import { errorText } from "./common/errors.ts";
import { recallNoChat, registerToggleCommand } from "./extension/activation/toggle.ts";
import { registerDoctorCommand } from "./extension/session/doctor.ts";
import { registerSetupCommand } from "./extension/session/setup.ts";
import { installSink } from "./extension/sink/index.ts";
import { installRunLimits } from "./extension/session/run-limits.ts";

const debug = debuglog("anon-notify");

export default function anonNotify(pi: ExtensionAPI): void {
  const early = registerFlags(pi);
  const runtimeId = createRuntimeId();
  const { report, bind } = createReporter();
  const recorder = runRecorderFor(pi);
  const current = new CurrentSession(runtimeId, early);
  const { text, target } = current;
  const handOver = createHandOver((error) => report(text().delivery.internalError(text().delivery.why(error))));
  const { presence, commands, services } = sessionServices(pi, { runtimeId, report, recorder, current, handOver });
  let notices: RunNotices | undefined;

  const changed = async (s: SessionState) => {
    publish(pi, s);
    notices?.setActive(notifying(s), s.ctx);
    await syncServices(s, services);
  };

  const open = (event: SessionStartEvent, ctx: ExtensionContext) => {
    bind(ctx);
    notices?.close();
    const s = openSession(pi, event, ctx, report);
    current.state = s;
    // A session that can never notify (subagent, bad or disabled configuration) records no runs.
    notices = s.delivery ? new RunNotices(recorder, target, handOver) : undefined;
    // The desktop channel has its own gate (sink.enabled), not the session's activation.
    if (s.config) installSink(pi, s.config.sink, { isSubagent: () => s.subagent, warn: (message) => report(message), text: s.text });
    void changed(s).then(() => recallNoChat(s, () => current.state === s && void changed(s)));
    // Finals left by a crash or an outage, from any session: sent in the background, oldest first.
    void s.delivery?.notifier.resendOutbox();
  };
  const close = async () => {
    notices?.close();
    notices = undefined;
    const s = current.state;
    current.state = undefined;
    if (!s) return;
    handOver.drain();
    await closeSession(s, services);
  };
  // Pairing wrote new files, or the token file went: the session is opened again as a reload would, without one.
  const refresh = async () => {
    const s = current.state;
    if (!s || !inputsChanged(s)) return;
    await close();
    open({ type: "session_start", reason: "reload" }, s.ctx);
  };

  installSendChannel(pi, { target, handOver, report, text, debug });
  registerToggleCommand(pi, { session: () => current.state, changed, text, report, refresh });
  registerSetupCommand(pi, { text, refresh });
  registerDoctorCommand(pi, { session: () => current.state, text, presence, commands, runtimeId });

  pi.on("session_start", (event, ctx) => open(event, ctx));
  // After `open`, which binds the terminal the limits' words go to.
  installRunLimits(pi, recorder, { report, text });

  pi.on("session_shutdown", close);
}

/** Pi's flags; the messages before a session is bound: the config's language (its errors wait for the session), else the locale's. */
function registerFlags(pi: ExtensionAPI): Messages {
  const early = messagesFor(loadConfig({ cwd: process.cwd(), env: process.env }).language);
  const swallowed = swallowedByFlag(process.argv.slice(2), SUBAGENT_FLAG);
  if (swallowed !== undefined) throw new Error(early.session.swallowedPrompt(SUBAGENT_FLAG, quotedPrompt(swallowed), SUBAGENT_ENV));
  pi.registerFlag(SUBAGENT_FLAG, { type: "boolean", default: false, description: early.session.flagDescription });
  pi.registerFlag(START_ON_FLAG, { type: "boolean", default: false, description: early.session.startOnFlagDescription });
  pi.registerFlag(APPROVALS_FLAG, { type: "string", description: early.session.approvalsFlagDescription });
  return early;
}

type ServiceWiring = { runtimeId: string; report: Report; recorder: RunRecorder; current: CurrentSession; handOver: HandOver };

/** The services an active session runs, started and stopped together by syncServices. */
function sessionServices(pi: ExtensionAPI, { runtimeId, report, recorder, current, handOver }: ServiceWiring) {
  const { text, target, connection } = current;
  // What the server answered presence: the command channel reads it, the notifier wakes on it.
  const server = new ServerFacts();
  const presence = new Presence(pi, {
    runtimeId,
    connection,
    server,
    report,
    text,
    explain: (error) => (current.state ? explainFailure(current.state, error) : errorText(error)),
  });
  // A heartbeat the server accepts means it answers again: finals an outage held back go now.
  server.onAccepted(() => current.state?.delivery?.notifier.serverAnswered());
  // An interrupted instruction's notice goes straight to the hand-over queue; features with a
  // control command kind register their handler on `commands.control`.
  const commands = installCommandChannel(pi, {
    presence,
    server,
    runtimeId,
    connection,
    report,
    text,
    notify: (request) => void handOverRequest(target(), handOver, request),
    runNow: () => stoppedRun(recorder.current()?.facts, current.state?.config?.content.maxTaskChars ?? LIMITS.taskChars),
  });
  const approvals = new ApprovalGate(pi, { runtimeId, control: commands.control, report, handOver, text, session: current.approvals });
  const services: SessionService[] = [presence, commands, installProgressTool(pi, current, recorder, report), approvals];
  return { presence, commands, services };
}
