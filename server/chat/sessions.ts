/** `anon.sessions`: the online sessions, each with the short reference the other commands take. */
import type { Context, Session } from "koishi";
import type { SessionProjection } from "../../protocol/sessions.ts";
import { koishi } from "../koishi.ts";
import { numbered, ownerCommand, type ChatKit } from "./kit.ts";

export function sessionLine(session: Session, number: number, s: SessionProjection, nowMs: number): string {
  const state = s.state === "idle" ? session.text(".idle") : s.activity ? session.text(".running-tool", [s.activity]) : session.text(".running");
  return session.text(".line", {
    ref: `#${number}`,
    project: s.project,
    model: s.model ?? "?",
    state,
    // Whole seconds at least: "817ms ago" is noise on a phone.
    since: koishi.Time.format(Math.max(1000, Math.floor((nowMs - Date.parse(s.last_activity_at)) / 1000) * 1000)),
    images: s.supports_images ? session.text(".images") : "",
  });
}

/** Sessions per chat message: a phone screen, and no flood of agent-named rows in one reply. */
export const CHAT_PAGE_SIZE = 10;

/** Page `page` (from 1, clamped to the last) of `items`. Pure. */
export function pageOf<T>(items: readonly T[], page: number, size: number): { items: T[]; page: number; pages: number } {
  const pages = Math.max(1, Math.ceil(items.length / size));
  const shown = Math.min(Math.max(1, page), pages);
  return { items: items.slice((shown - 1) * size, shown * size), page: shown, pages };
}

export function sessionCommands(ctx: Context, kit: ChatKit): void {
  ownerCommand(ctx, kit, "anon.sessions [page:posint]").action(({ session }, page) => {
    const online = numbered(kit);
    if (online.length === 0) return session!.text(".empty");
    const now = Date.now();
    const shown = pageOf(online, page ?? 1, CHAT_PAGE_SIZE);
    const lines = shown.items.map(({ number, session: s }) => sessionLine(session!, number, s, now));
    const more = shown.pages > 1 ? [session!.text(".page", { page: shown.page, pages: shown.pages, next: (shown.page % shown.pages) + 1 })] : [];
    return [session!.text(".header", [online.length]), ...lines, ...more, session!.text(".footer", { ref: `#${shown.items[0]!.number}` })].join("\n");
  });
}
