/** `anon.mute [duration] [session]`, `anon.unmute [session]` and `anon.status`. */
import type { Context, Session } from "koishi";
import type { MuteEntry } from "../../protocol/operator.ts";
import { looksLikeDuration, parseDuration } from "../mute/decisions.ts";
import { ChatRefusal, numbered, ownerAction, projectName, sessionByRef, sessionName, type ChatKit } from "./kit.ts";
import { say } from "./words.ts";

/** A mute's end as the locale writes it on the server's clock (Intl): the time, with the date when it
 * is another day (`21:30`; `12月2日 21:30` / `Dec 2, 21:30`). Pure. */
export function clockText(iso: string, now: Date, locale: string): string {
  const at = new Date(iso);
  const time = { hour: "2-digit", minute: "2-digit", hourCycle: "h23" } as const;
  const sameDay = at.toDateString() === now.toDateString();
  return new Intl.DateTimeFormat(locale, sameDay ? time : { ...time, month: "short", day: "numeric" }).format(at);
}

function muteText(kit: ChatKit, session: Session, mutes: readonly MuteEntry[]): string {
  if (mutes.length === 0) return say(session, ".mute-off");
  const now = new Date();
  const online = numbered(kit);
  return mutes
    .map((mute) => {
      if (mute.session_id === null) return say(session, ".mute-all", [clockText(mute.until, now, say(session, "anon-notify.locale"))]);
      const found = online.find((s) => s.session.session_id === mute.session_id);
      const name = found ? sessionName(session, found) : mute.session_id;
      return say(session, ".mute-session", [name, clockText(mute.until, now, say(session, "anon-notify.locale"))]);
    })
    .join("；");
}

export function muteCommands(ctx: Context, kit: ChatKit): void {
  ownerAction(ctx, kit, "anon.mute [duration:string] [session:string]", async ({ session }, first, second) => {
    // The duration may be left out: `anon.mute #1` mutes session 1 for the default time.
    const minutes = first === undefined ? undefined : parseDuration(first);
    if (minutes === null && (second !== undefined || looksLikeDuration(first!))) throw new ChatRefusal(say(session, ".bad-duration", [first]));
    const ref = minutes === null ? first : second;
    const target = ref === undefined ? null : sessionByRef(kit, session, ref);
    const mute = await kit.operator.mute(target?.session.session_id ?? null, minutes ?? undefined);
    const until = clockText(mute.until, new Date(), say(session, "anon-notify.locale"));
    if (!target) return say(session, ".muted-all", { until });
    return say(session, ".muted-session", { until, ref: `#${target.number}`, project: projectName(session, target.session) });
  });

  ownerAction(ctx, kit, "anon.unmute [session:string]", async ({ session }, ref) => {
    // A session that went offline can still be named by its full id.
    const sessionId =
      ref === undefined ? null : kit.operator.mutes().some((m) => m.session_id === ref) ? ref : sessionByRef(kit, session, ref).session.session_id;
    const ended = await kit.operator.unmute(sessionId);
    return say(session, ended > 0 ? ".unmuted" : ".none");
  });

  ownerAction(ctx, kit, "anon.status", async ({ session }) => {
    const status = await kit.operator.status();
    const held = status.held > 0 ? say(session, ".held", [status.held]) : "";
    const mute = muteText(kit, session, status.mutes) + held;
    return say(session, ".report", { sessions: status.sessions, running: status.running, pending: status.pending, mute, waiting: status.waiting });
  });
}
