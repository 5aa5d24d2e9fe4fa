/** Hands notices to the notifier just after the Pi handler, in order, so sampling what every notice of a session
 * shares, validating, building and the outbox write stay off Pi's path (Pi awaits handlers). Shutdown drains what is still waiting. */
import { randomUUID } from "node:crypto";
import type { ExtensionAPI, ExtensionContext } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import type { EventBody } from "../../protocol/events.ts";
import { SEND_CHANNEL, SendRequest } from "../../protocol/state-bus.ts";
import { formatIssues } from "../../protocol/wire.ts";
import type { Messages } from "../texts/messages.ts";
import { externalNotice, sampleContextUsage, type NoticeContext, type PiContextUsage } from "./notice-rules.ts";
import type { Notifier, SendOptions } from "./notifier.ts";
import { renderSource } from "../config/config.ts";
import type { Config } from "../config/schema-rules.ts";
import { modelLabel, projectName } from "../session/label-rules.ts";

/** Where notices go now (undefined while the session does not notify); `sample` reads now what a notice says of this moment (`sampleNoticeContext`). */
export type NoticeTarget = { config: Config; notifier: Notifier; context(): NoticeContext; sample(): () => NoticeContext };

/** Reads from Pi now what a notice says of this moment (context usage, model, mode, time) and returns the builder of the rest (the source line, the
 * checked usage): a Pi handler pays only for the reads, and the building runs after it, off Pi's turn. */
export function sampleNoticeContext(ctx: ExtensionContext, sessionId: string, runtimeId: string, config: Config, m: Messages): () => NoticeContext {
  let readUsage: () => PiContextUsage | undefined;
  try {
    const usage = ctx.getContextUsage();
    readUsage = () => usage;
  } catch (error) {
    readUsage = () => {
      throw error;
    };
  }
  const { cwd, mode } = ctx;
  const model = modelLabel(ctx.model);
  const now = new Date();
  return () => {
    const project = projectName(cwd);
    return {
      sessionId,
      runtimeId,
      project,
      source: renderSource(config.source, { project, cwd, sessionId, model, mode }),
      content: config.content,
      contextUsage: sampleContextUsage(readUsage),
      now,
      text: m.notice,
    };
  };
}

export type HandOver = ReturnType<typeof createHandOver>;

/** `failed`: a builder threw (it runs after Pi's handler, so nothing else would hear of it). */
export function createHandOver(failed: (error: unknown) => void) {
  const waiting: (() => void)[] = [];
  let timer: ReturnType<typeof setImmediate> | undefined;
  const drain = () => {
    if (timer) clearImmediate(timer);
    timer = undefined;
    for (const send of waiting.splice(0)) send();
  };
  return {
    /** A notice, or the builder of one (undefined: nothing to send). */
    enqueue(notifier: Notifier, notice: EventBody | (() => EventBody | undefined), options: SendOptions): void {
      waiting.push(() => {
        let event: EventBody | undefined;
        try {
          event = typeof notice === "function" ? notice() : notice;
        } catch (error) {
          return failed(error);
        }
        if (event) notifier.send(event, options);
      });
      timer ??= setImmediate(drain);
    },
    drain,
  };
}

/** `anon-notify:send`: another extension's notice request, validated against the shared schema and handed over like the extension's own. */
export function installSendChannel(
  pi: ExtensionAPI,
  deps: { target(): NoticeTarget | undefined; handOver: HandOver; report(message: string): void; text(): Messages; debug(message: string): void },
): void {
  pi.events.on(SEND_CHANNEL, (data) => {
    let parsed: ReturnType<typeof SendRequest.safeParse>;
    try {
      parsed = SendRequest.safeParse(data);
    } catch (error) {
      // A hostile payload (throwing getter, revoked Proxy) throws inside zod itself.
      return deps.report(deps.text().send.unreadable(errorText(error)));
    }
    if (!parsed.success) return deps.report(deps.text().send.invalid(formatIssues(parsed.error, "(payload)")));
    if (!handOverRequest(deps.target(), deps.handOver, parsed.data)) deps.debug("anon-notify:send ignored: session not active");
  });
}

/** A notice request (`anon-notify:send`, the extension's own channels), handed over like the extension's own; false when the session does not notify. */
export function handOverRequest(to: NoticeTarget | undefined, handOver: HandOver, request: SendRequest): boolean {
  if (!to) return false;
  const notice = externalNotice(request, randomUUID(), to.context());
  // An explicit request, not a progress report: the progress interval does not hold it back.
  handOver.enqueue(to.notifier, notice, { final: notice.status === "completed" || notice.status === "failed", throttled: false });
  return true;
}
