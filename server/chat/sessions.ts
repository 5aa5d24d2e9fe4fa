/** `anon.sessions`: the online sessions, each with the short reference the other commands take. */
import type { Context, Session } from "koishi";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { durationText } from "../approvals/messages.ts";
import { numbered, ownerCommand, projectName, type ChatKit } from "./kit.ts";

export function sessionLine(session: Session, number: number, s: SessionProjection, nowMs: number): string {
  const state = s.state === "idle" ? session.text(".idle") : s.activity ? session.text(".running-tool", [s.activity]) : session.text(".running");
  return session.text(".line", {
    ref: `#${number}`,
    project: projectName(session, s),
    model: s.model ?? "?",
    state,
    // In the reader's language (Intl), whole seconds at least: "817ms ago" is noise on a phone.
    since: durationText(nowMs - Date.parse(s.last_activity_at), session.text("anon-notify.locale")),
    images: s.supports_images ? session.text(".images") : "",
  });
}

export function sessionCommands(ctx: Context, kit: ChatKit): void {
  ownerCommand(ctx, kit, "anon.sessions").action(({ session }) => {
    const online = numbered(kit);
    if (online.length === 0) return session!.text(".empty");
    const now = Date.now();
    const lines = online.map(({ number, session: s }) => sessionLine(session!, number, s, now));
    return [session!.text(".header", [online.length]), ...lines, session!.text(".footer", { ref: `#${online[0]!.number}` })].join("\n");
  });
}
