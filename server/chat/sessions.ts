/** `anon.sessions`: the online sessions, each with the short reference the other commands take. */
import type { Context, Session } from "koishi";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { durationText } from "../approvals/message-rules.ts";
import { numbered, ownerCommand, projectName, type ChatKit } from "./kit.ts";
import { reply, say } from "./words.ts";

export function sessionLine(session: Session, number: number, s: SessionProjection, nowMs: number): string {
  const state = s.state === "idle" ? say(session, ".idle") : s.activity ? say(session, ".running-tool", [s.activity]) : say(session, ".running");
  return say(session, ".line", {
    ref: `#${number}`,
    project: projectName(session, s),
    model: s.model ?? "?",
    state,
    // In the reader's language (Intl), whole seconds at least: "817ms ago" is noise on a phone.
    since: durationText(nowMs - Date.parse(s.last_activity_at), say(session, "anon-notify.locale")),
    images: s.supports_images ? say(session, ".images") : "",
  });
}

export function sessionCommands(ctx: Context, kit: ChatKit): void {
  ownerCommand(ctx, kit, "anon.sessions").action(({ session }) => {
    const online = numbered(kit);
    if (online.length === 0) return reply(say(session!, ".empty"));
    const now = Date.now();
    const lines = online.map(({ number, session: s }) => sessionLine(session!, number, s, now));
    return reply([say(session!, ".header", [online.length]), ...lines, say(session!, ".footer", { ref: `#${online[0]!.number}` })].join("\n"));
  });
}
