/** `anon.grants` and `anon.revoke <id>`, through GrantService like the operator API and the console. */
import type { Context, Session } from "koishi";
import type { Grant } from "../../protocol/approvals.ts";
import { coversText, durationText, voiceOf } from "../approvals/message-rules.ts";
import { countText, sessionSay } from "../locales/load.ts";
import { DomainError } from "../../common/domain-error.ts";
import { ChatRefusal, chatDecider, ownerAction, sessionLabel, type ChatKit } from "./kit.ts";
import { say } from "./words.ts";

const LISTED = 20;

function grantLine(kit: ChatKit, session: Session, grant: Grant, nowMs: number): string {
  const voice = voiceOf(sessionSay(session));
  return say(session, "commands.anon.grants.messages.line", {
    grant: grant.grant_id,
    session: sessionLabel(kit, session, grant.session_id),
    covers: coversText(grant, voice),
    left: durationText(Date.parse(grant.expires_at) - nowMs, voice.locale),
    uses: countText(sessionSay(session), "anon-notify.uses", grant.uses),
  });
}

export function grantCommands(ctx: Context, kit: ChatKit): void {
  ownerAction(ctx, kit, "anon.grants", async ({ session }) => {
    const live = await kit.grants.list({ state: "live", limit: LISTED });
    if (live.length === 0) return say(session, ".empty");
    const now = Date.now();
    return [say(session, ".header", [live.length]), ...live.map((grant) => grantLine(kit, session, grant, now)), say(session, ".footer")].join("\n");
  });

  ownerAction(ctx, kit, "anon.revoke <grant:string>", async ({ session }, ref) => {
    if (!ref) return say(session, ".usage");
    try {
      const { grant, revoked } = await kit.grants.revoke(ref, chatDecider(session));
      return say(session, revoked ? ".revoked" : ".ended", { grant: grant.grant_id, uses: countText(sessionSay(session), "anon-notify.uses", grant.uses) });
    } catch (error) {
      if (error instanceof DomainError && error.code === "not_found") throw new ChatRefusal(say(session, ".not-found", [ref]));
      throw error;
    }
  });
}
