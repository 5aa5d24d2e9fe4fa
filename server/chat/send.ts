/** The owner's instructions: `anon.send <session> …`, or a reply quoting a notice; the platform's message
 * id is the request key, so a message delivered twice queues one command. */
import type { Context, Session } from "koishi";
import type { OperatorCommandCreated } from "../../protocol/operator.ts";
import { ChatRefusal, asOwner, ownerCommand, projectName, sessionByRef, type ChatKit } from "./kit.ts";
import { fetchImages, imageSources, plainText } from "./images.ts";
import { shortCommandId } from "./instructions.ts";
import { typedTail } from "./typed.ts";
import { reply, say } from "./words.ts";

function requestKey(session: Session): string | null {
  return session.messageId ? `chat:${session.platform}:${session.channelId ?? ""}:${session.messageId}` : null;
}

export function sendCommands(ctx: Context, kit: ChatKit): void {
  ownerCommand(ctx, kit, "anon.send <session:string> <instruction:rawtext>").action((argv, ref, instruction) => {
    const session = argv.session;
    return asOwner(ctx, kit, session!, async () => {
      const text = typedTail(argv, [ref], instruction);
      if (!ref || !text) return say(session!, ".usage");
      const target = sessionByRef(kit, session!, ref);
      const images = await fetchImages(ctx, session!, imageSources(session!));
      const created = await kit.operator.createCommand({
        session_id: target.session.session_id,
        instruction: text,
        images,
        request_key: requestKey(session!),
        origin: "operator",
      });
      return say(session!, ".queued", {
        ref: `#${target.number}`,
        project: projectName(session!, target.session),
        command: shortCommandId(created.command.command_id),
      });
    });
  });

  // A reply that quotes a notice the bot delivered directly; any other message goes on. Ahead of other
  // plugins' middleware (a persona's), which would otherwise also take the instruction as chat.
  ctx.middleware(async (session, next) => {
    const quoted = session.quote?.id;
    // A stranger's quote goes on like any other message, whatever it quotes: nothing tells them which messages matter here.
    if (!quoted || session.argv?.command || !kit.guard.isOwner(session)) return next();
    const notices = await kit.operator.noticesOfMessage(quoted);
    const text = plainText(session.content ?? "");
    if (notices.length === 0 || !text) return next();
    const verdict = await kit.guard.admit(session, true, "reply", { quote: quoted, content: session.content ?? "" });
    if (verdict !== "owner") return reply(kit.guard.refusalText(session, verdict));
    return asOwner(ctx, kit, session, async () => {
      if (new Set(notices.map((n) => n.session_id)).size > 1) throw new ChatRefusal(say(session, "anon-notify.reply.several-sessions"));
      const notice = notices[0]!;
      const images = await fetchImages(ctx, session, imageSources(session));
      const created: OperatorCommandCreated = await kit.operator.createCommand({
        session_id: notice.session_id,
        event_id: notice.event_id,
        instruction: text,
        images,
        request_key: requestKey(session),
        origin: "operator",
      });
      const online = kit.operator.onlineSessions().find((s) => s.session_id === notice.session_id);
      const project = online ? projectName(session, online) : notice.session_id;
      return say(session, "anon-notify.reply.queued", { project, event: notice.event_id, command: shortCommandId(created.command.command_id) });
    });
  }, true);
}
