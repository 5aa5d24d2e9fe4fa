/** `anon-notify:send`: another extension's notice request, validated against the shared schema, scoped to
 * the session and handed over like the extension's own; nothing is sent while the session does not notify. */
import { randomUUID } from "node:crypto";
import type { ExtensionAPI } from "@earendil-works/pi-coding-agent";
import { errorText } from "../../common/errors.ts";
import { formatIssues } from "../../protocol/wire.ts";
import { SEND_CHANNEL, SendRequest } from "../../protocol/state-bus.ts";
import type { Messages } from "../texts/messages.ts";
import type { HandOver } from "./hand-over.ts";
import { externalNotice } from "./notice-rules.ts";
import type { NoticeTarget } from "./run-notices.ts";

export interface SendChannelDeps {
  target(): NoticeTarget | undefined;
  handOver: HandOver;
  report(message: string): void;
  text(): Messages;
  debug(message: string): void;
}

export function installSendChannel(pi: ExtensionAPI, deps: SendChannelDeps): void {
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

/** A request for a notice, as `anon-notify:send` or the extension's own channels make one, handed
 * over like the extension's own notices; false when the session does not notify (nothing is sent). */
export function handOverRequest(to: NoticeTarget | undefined, handOver: HandOver, request: SendRequest): boolean {
  if (!to) return false;
  const notice = externalNotice(request, randomUUID(), to.context());
  // An explicit request, not a progress report: the progress interval does not hold it back.
  handOver.enqueue(to.notifier, notice, { final: notice.status === "completed" || notice.status === "failed", throttled: false });
  return true;
}
