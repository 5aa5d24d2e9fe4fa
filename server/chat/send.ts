/** The owner's instructions: `anon.send <session> …`, or a reply quoting a notice; the platform's message
 * id is the request key, so a message delivered twice queues one command. */
import type { Context, Session } from "koishi";
import { ChatRefusal, asOwner, ownerAction, ownerQuote, projectName, sessionByRef, type ChatKit } from "./kit.ts";
import { fetchImages, imageSources, plainText } from "./images.ts";
import { shortCommandId } from "./instructions.ts";
import { typedTail } from "./typed.ts";
import { reply, say } from "./words.ts";

export function sendCommands(ctx: Context, kit: ChatKit): void {
  /** Queues the owner's message with its images; the short id of the command it became. */
  const queue = async (session: Session, target: { session_id: string; event_id?: string }, instruction: string) => {
    const images = await fetchImages(ctx, session, imageSources(session));
    const request_key = session.messageId ? `chat:${session.platform}:${session.channelId ?? ""}:${session.messageId}` : null;
    const created = await kit.operator.createCommand({ ...target, instruction, images, request_key, origin: "operator" });
    return shortCommandId(created.command.command_id);
  };

  ownerAction(ctx, kit, "anon.send <session:string> <instruction:rawtext>", async (argv, ref, instruction) => {
    const { session } = argv;
    const text = typedTail(argv, [ref], instruction);
    if (!ref || !text) return say(session, ".usage");
    const target = sessionByRef(kit, session, ref);
    const command = await queue(session, { session_id: target.session.session_id }, text);
    return say(session, ".queued", { ref: `#${target.number}`, project: projectName(session, target.session), command });
  });

  // A reply that quotes a notice the bot delivered directly; any other message goes on. Ahead of other
  // plugins' middleware (a persona's), which would otherwise also take the instruction as chat.
  ctx.middleware(async (session, next) => {
    const quoted = ownerQuote(kit, session);
    if (!quoted) return next();
    const notices = await kit.operator.noticesOfMessage(quoted);
    const text = plainText(session.content ?? "");
    if (notices.length === 0 || !text) return next();
    const verdict = await kit.guard.admit(session, true, "reply", { quote: quoted, content: session.content ?? "" });
    if (verdict !== "owner") return reply(kit.guard.refusalText(session, verdict));
    return asOwner(ctx, kit, session, async () => {
      if (new Set(notices.map((n) => n.session_id)).size > 1) throw new ChatRefusal(say(session, "anon-notify.reply.several-sessions"));
      const notice = notices[0]!;
      const command = await queue(session, { session_id: notice.session_id, event_id: notice.event_id }, text);
      const online = kit.operator.onlineSessions().find((s) => s.session_id === notice.session_id);
      const project = online ? projectName(session, online) : notice.session_id;
      return say(session, "anon-notify.reply.queued", { project, event: notice.event_id, command });
    });
  }, true);
}
