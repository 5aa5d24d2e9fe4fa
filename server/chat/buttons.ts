/** A press on an approval button is judged like the typed answer: the presser's platform identity, the
 * owner guard, the same service call. A stranger's press changes nothing and gets no answer. */
import type { Bot, Context, Session } from "koishi";
import { z } from "zod";
import type { Approval } from "../../protocol/approvals.ts";
import { approvalTag, parseButtonId } from "../approvals/buttons.ts";
import { actionText, shownCommand, voiceOf } from "../approvals/message-rules.ts";
import { koishi } from "../koishi.ts";
import { sessionSay } from "../locales/load.ts";
import { decide, resultText } from "./approvals.ts";
import { ChatRefusal, asOwner, type ChatKit } from "./kit.ts";
import { reply, say } from "./words.ts";

const ANSWERED_COMMAND_CHARS = 300;

export function buttonPresses(ctx: Context, kit: ChatKit): void {
  ctx.on("interaction/button", async (session) => {
    const id = session.event.button?.id ?? "";
    const pressed = parseButtonId(id);
    if (!pressed) return;
    const verdict = await kit.guard.admit(session, true, "button", { button: id });
    if (verdict !== "owner") {
      // Only the owner is told why (a press in a group); anyone else's press does nothing at all.
      const text = verdict === "stranger" || verdict === "not_configured" ? "" : kit.guard.refusalText(session, verdict);
      if (text) await session.send(reply(text));
      return;
    }
    const found = await kit.approvals.find(pressed.code);
    // A reused code names a newer approval: the old button must not answer it.
    const approval = found && approvalTag(found.approval_id) === pressed.tag ? found : undefined;
    const text = await asOwner(ctx, kit, session, async () => {
      if (!approval) throw new ChatRefusal(say(session, "anon-notify.approval.not-found", [pressed.code]));
      const { decision, minutes } = pressed.answer;
      return decide(kit, session, { ref: approval.approval_id, decision, grant_minutes: minutes ?? undefined });
    });
    await session.send(text);
    const after = approval && (await kit.approvals.find(approval.approval_id));
    if (after && after.state !== "pending") await editPressed(ctx, session, answeredText(session, after));
  });
}

/** The request as it reads once answered: what it asked, what became of it, who decided; no buttons. */
export function answeredText(session: Session, approval: Approval): string {
  const voice = voiceOf(sessionSay(session));
  const head = voice.say("answered", {
    code: approval.code,
    action: actionText(approval, voice),
    result: resultText(session, approval),
    by: approval.decided_by ?? "-",
  });
  return `${head}\n┃ ${shownCommand(approval, ANSWERED_COMMAND_CHARS).text}`;
}

type Pressed = { channelId: string; messageId: string };

/** Where the pressed message is, from the platform's own event (the session's ids name the press itself). */
const PRESSED: Record<string, z.ZodType<Pressed>> = {
  telegram: z
    .object({ callback_query: z.object({ message: z.object({ message_id: z.number(), chat: z.object({ id: z.number() }) }) }) })
    .transform(({ callback_query: { message } }) => ({ channelId: String(message.chat.id), messageId: String(message.message_id) })),
  discord: z
    .object({ d: z.object({ channel_id: z.string(), message: z.object({ id: z.string() }) }) })
    .transform(({ d }) => ({ channelId: d.channel_id, messageId: d.message.id })),
};

/** Discord's markdown, escaped the way its adapter escapes text (an edit skips the encoder). */
const discordText = (text: string) => text.replace(/[\\*_`~|()[\]]/g, "\\$&").replace(/@(everyone|here)/g, "\\@$1");

/** Rewrites a message in place and drops its buttons; Telegram's edit without `reply_markup` drops them. */
const EDIT: Record<string, (bot: Bot, at: Pressed, text: string) => Promise<unknown>> = {
  telegram: (bot, at, text) => bot.editMessage(at.channelId, at.messageId, koishi.h.text(text)),
  discord: (bot, at, text) =>
    (bot as Bot & { internal: { editMessage(c: string, m: string, body: object): Promise<unknown> } }).internal.editMessage(at.channelId, at.messageId, {
      content: discordText(text),
      components: [],
    }),
};

async function editPressed(ctx: Context, session: Session, text: string): Promise<void> {
  const at = PRESSED[session.platform]?.safeParse(session.event._data).data;
  const edit = EDIT[session.platform];
  if (!at || !edit) return;
  try {
    await edit(session.bot, at, text);
  } catch (error) {
    // The answer has gone out as a reply already; a request left as it was is only untidy.
    ctx.logger("notify-webhook").debug("could not edit the answered request: %s", error);
  }
}
