/** `anon.commands [session]` and `anon.cancel <command>`: the recent instructions, and taking one back. */
import type { Context, Session } from "koishi";
import type { CommandSummary } from "../../protocol/queue.ts";
import { MIN_PREFIX } from "./refs.ts";
import { ChatRefusal, numbered, ownerAction, sessionByRef, sessionName, type ChatKit } from "./kit.ts";
import { say } from "./words.ts";

const LISTED = 10;

/** The part of a command id people type: 8 characters of its random part. */
export const shortCommandId = (commandId: string): string => commandId.replace(/^c-/, "").slice(0, 8);

function commandLine(session: Session, command: CommandSummary, label: string): string {
  const line = say(session, "commands.anon.commands.messages.line", {
    command: shortCommandId(command.command_id),
    state: say(session, `anon-notify.states.${command.state}`),
    preview: command.preview.replace(/\s+/g, " ").slice(0, 60),
  });
  return label ? `${label} ${line}` : line;
}

export function instructionCommands(ctx: Context, kit: ChatKit): void {
  ownerAction(ctx, kit, "anon.commands [session:string]", async ({ session }, ref) => {
    if (ref) {
      const target = sessionByRef(kit, session, ref);
      const commands = await kit.operator.commands(target.session.session_id, LISTED);
      if (commands.length === 0) return say(session, ".empty");
      return [say(session, ".header", [sessionName(session, target)]), ...commands.map((c) => commandLine(session, c, ""))].join("\n");
    }
    const online = numbered(kit);
    const labelOf = (sessionId: string) => {
      const found = online.find((s) => s.session.session_id === sessionId);
      return found ? `#${found.number}` : "";
    };
    const commands = (await kit.operator.findCommands("")).slice(0, LISTED);
    if (commands.length === 0) return say(session, ".empty");
    return commands.map((c) => commandLine(session, c, labelOf(c.session_id))).join("\n");
  });

  ownerAction(ctx, kit, "anon.cancel <command:string>", async ({ session }, ref) => {
    const wanted = (ref ?? "").trim();
    const matches = wanted.replace(/^c-/, "").length >= MIN_PREFIX ? await kit.operator.findCommands(wanted) : [];
    if (matches.length === 0) throw new ChatRefusal(say(session, ".not-found", [wanted]));
    if (matches.length > 1) throw new ChatRefusal(say(session, ".ambiguous", [wanted, matches.map((c) => shortCommandId(c.command_id)).join(", ")]));
    const command = matches[0]!;
    await kit.operator.cancel(command.session_id, command.command_id);
    return say(session, ".cancelled", [shortCommandId(command.command_id)]);
  });
}
