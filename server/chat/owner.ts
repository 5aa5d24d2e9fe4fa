/**
 * Who may use the chat commands: the owner, that is the configured target (`recipientId` on the
 * platform of `botId`: a platform and user id pair), writing in a private chat. Anyone else, and
 * the owner in a group, is refused and changes nothing; every attempt, allowed or refused, is on
 * the audit trail. A command must come from a message the owner typed (Koishi marks those as the
 * root of the parse): another plugin, such as the persona, calling `session.execute` is refused.
 */
import type { Argv, Command, Session } from "koishi";
import type { AuditLog } from "../audit/store.ts";

export interface ChatOwner {
  platform: string;
  userId: string;
}

/** The owner as a platform and user id pair; `null` when the plugin has no complete target. */
export function chatOwner(botId: string, recipientId: string): ChatOwner | null {
  const platform = botId.split(":", 1)[0] ?? "";
  if (!platform || !botId.includes(":") || !recipientId) return null;
  return { platform, userId: recipientId };
}

export interface Speaker {
  platform: string;
  userId: string | undefined;
  isDirect: boolean;
  /** The command was parsed from the speaker's own message, not executed by a plugin. */
  typed: boolean;
}

export type Verdict = "owner" | "not_configured" | "stranger" | "group" | "not_typed";

/** Whether `speaker` may act as the owner, and if not, why. Pure. */
export function verdictOf(owner: ChatOwner | null, speaker: Speaker): Verdict {
  if (!owner) return "not_configured";
  if (speaker.platform !== owner.platform || speaker.userId !== owner.userId) return "stranger";
  if (!speaker.isDirect) return "group";
  if (!speaker.typed) return "not_typed";
  return "owner";
}

export type RefusalMode = "reply" | "silent";

export interface OwnerGuardOptions {
  owner: ChatOwner | null;
  /** `reply`: a short refusal; `silent`: no answer at all. */
  refusal: RefusalMode;
  audit: AuditLog;
}

export function speakerOf(session: Session, typed: boolean): Speaker {
  return { platform: session.platform, userId: session.userId, isDirect: session.isDirect, typed };
}

function chatOf(session: Session) {
  return { platform: session.platform, user_id: session.userId ?? null, channel_id: session.channelId ?? null, direct: session.isDirect };
}

/** The guard every owner command and the owner's replies to notices pass. */
export class OwnerGuard {
  readonly #options: OwnerGuardOptions;

  constructor(options: OwnerGuardOptions) {
    this.#options = options;
  }

  /**
   * Decides and records one attempt. Returns the verdict; for anything but `owner` the caller
   * answers with `refusalText` and does nothing else.
   */
  async admit(session: Session, typed: boolean, what: string, input: Record<string, unknown>): Promise<Verdict> {
    const verdict = verdictOf(this.#options.owner, speakerOf(session, typed));
    const allowed = verdict === "owner";
    await this.#options.audit.record({
      actor: allowed ? "operator" : "server",
      action: allowed ? "chat.command" : "chat.refused",
      data: { command: what, input, chat: chatOf(session), ...(allowed ? {} : { reason: verdict }) },
    });
    return verdict;
  }

  /** The answer to a refused attempt: a short sentence, or nothing in silent mode. */
  refusalText(session: Session, verdict: Verdict): string {
    if (this.#options.refusal === "silent") return "";
    return session.text(`anon-notify.refused.${verdict}`);
  }

  /** Runs this guard before `command`'s own checks (authority included), so every attempt is recorded. */
  protect<C extends Command>(command: C): C {
    command.before(async (argv: Argv) => {
      const session = argv.session!;
      const verdict = await this.admit(session, argv.root === true, command.name, { args: argv.args ?? [], options: argv.options ?? {} });
      return verdict === "owner" ? undefined : this.refusalText(session, verdict);
    });
    return command;
  }
}
