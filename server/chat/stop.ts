/** `anon.stop <session>`, like Esc in the terminal: queued on the control lane, one reply once the outcome
 * is in or the bounded wait ends. */
import type { Context } from "koishi";
import { ownerAction, projectName, sessionByRef, type ChatKit } from "./kit.ts";
import { say } from "./words.ts";

/** How long the reply waits for the extension to say what the stop did. */
export const STOP_REPLY_WAIT_MS = 10_000;

export function stopCommands(ctx: Context, kit: ChatKit): void {
  ownerAction(ctx, kit, "anon.stop <session:string>", async ({ session }, ref) => {
    if (!ref) return say(session, ".usage");
    const target = sessionByRef(kit, session, ref);
    const names = { ref: `#${target.number}`, project: projectName(session, target.session) };
    const queued = await kit.operator.requestStop(target.session.session_id, "operator");
    const final = await kit.operator.waitForCommandOutcome(queued.command_id, STOP_REPLY_WAIT_MS);
    if (final.state === "accepted" && final.outcome === "stopped") return say(session, ".stopped", names);
    if (final.state === "accepted" && final.outcome === "already_idle") return say(session, ".already-idle", names);
    if (final.state === "cancelled") return say(session, ".expired", names);
    return say(session, ".not-confirmed", names);
  });
}
