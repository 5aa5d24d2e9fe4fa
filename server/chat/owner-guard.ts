/** Only the owner, in a private chat, with a command the platform event itself carries (never another
 * plugin's `session.execute`). Every attempt is audited; strangers are answered once, then quietly. */
import { isDeepStrictEqual } from "node:util";
import type { Argv, Command, Session } from "koishi";
import type { AuditLog } from "../audit/store.ts";
import { reply, say } from "./words.ts";

/** After a refusal is answered, the same user's further refusals get no answer (and one audit row) for this long. */
export const REFUSAL_QUIET_MS = 10 * 60_000;
export const REFUSED_EXCERPT_CHARS = 200;
/** Users remembered at most; the oldest are forgotten first. */
const MAX_REFUSED_USERS = 10_000;

export type ChatOwner = { platform: string; userId: string };

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

/** Whether `argv` is the command the platform event itself carries (Koishi's `session.argv`, or a native command interaction); a plugin's
 * `session.execute` builds another argv, whatever flags it sets. */
export function fromPlatformEvent(argv: Argv): boolean {
  const session = argv.session;
  if (!session) return false;
  if (session.argv === argv) return true;
  const native = session.type === "interaction/command" ? session.event.argv : undefined;
  return (
    !!native &&
    session.app.$commander.get(native.name) === argv.command &&
    isDeepStrictEqual(native.arguments ?? [], argv.args ?? []) &&
    isDeepStrictEqual(native.options ?? {}, argv.options ?? {})
  );
}

export interface RefusalState {
  /** When the last answered refusal was; later ones within the quiet time are not answered. */
  answeredAtMs: number;
  /** Refusals since then that got no answer and no audit row of their own. */
  unanswered: number;
}

/** One more refusal for a user: answer it (and write it out with the count of silent ones before), or stay silent. Pure. */
export function refusalStep(
  state: RefusalState | undefined,
  nowMs: number,
  quietMs: number,
): { state: RefusalState; answer: boolean; unansweredBefore: number } {
  if (state && nowMs - state.answeredAtMs < quietMs) return { state: { ...state, unanswered: state.unanswered + 1 }, answer: false, unansweredBefore: 0 };
  return { state: { answeredAtMs: nowMs, unanswered: 0 }, answer: true, unansweredBefore: state?.unanswered ?? 0 };
}

/** A refused input as the trail keeps it: its JSON, cut to `REFUSED_EXCERPT_CHARS` with the full length noted. */
export function refusedExcerpt(input: Record<string, unknown>): string {
  const text = JSON.stringify(input);
  return text.length <= REFUSED_EXCERPT_CHARS ? text : `${text.slice(0, REFUSED_EXCERPT_CHARS)}… (${text.length} chars)`;
}

const speakerOf = (session: Session, typed: boolean) => ({ platform: session.platform, userId: session.userId, isDirect: session.isDirect, typed });

function chatOf(session: Session) {
  return { platform: session.platform, user_id: session.userId ?? null, channel_id: session.channelId ?? null, direct: session.isDirect };
}

export class OwnerGuard {
  readonly #options: OwnerGuardOptions;
  /** Per `platform:userId`, oldest first. */
  readonly #refused = new Map<string, RefusalState>();
  /** Sessions whose refusal is not answered (the user's quiet time). */
  readonly #quiet = new WeakSet<Session>();

  constructor(options: OwnerGuardOptions) {
    this.#options = options;
  }

  /** Whether `session` comes from the owner at all (in any chat): strangers' messages are none of this plugin's business. */
  isOwner(session: Session): boolean {
    const verdict = verdictOf(this.#options.owner, speakerOf(session, true));
    return verdict !== "stranger" && verdict !== "not_configured";
  }

  /** Decides and records one attempt; for anything but `owner` the caller answers with `refusalText` and does nothing else. */
  async admit(session: Session, typed: boolean, what: string, input: Record<string, unknown>): Promise<Verdict> {
    const verdict = verdictOf(this.#options.owner, speakerOf(session, typed));
    if (verdict === "owner") {
      await this.#options.audit.record({ actor: "operator", action: "chat.command", data: { command: what, input, chat: chatOf(session) } });
      return verdict;
    }
    // The owner in a group, or a plugin acting for them, is always told; only other people are rate limited.
    const unanswered: { unanswered_before?: number } = {};
    if (verdict !== "group" && verdict !== "not_typed") {
      const user = `${session.platform}:${session.userId ?? ""}`;
      const step = refusalStep(this.#refused.get(user), Date.now(), REFUSAL_QUIET_MS);
      this.#refused.delete(user);
      this.#refused.set(user, step.state);
      if (this.#refused.size > MAX_REFUSED_USERS) this.#refused.delete(this.#refused.keys().next().value!);
      if (!step.answer) {
        this.#quiet.add(session);
        return verdict;
      }
      if (step.unansweredBefore > 0) unanswered.unanswered_before = step.unansweredBefore;
    }
    const data = { command: what, input: refusedExcerpt(input), chat: chatOf(session), reason: verdict, ...unanswered };
    await this.#options.audit.record({ actor: "server", action: "chat.refused", data });
    return verdict;
  }

  /** The answer to a refused attempt: a short sentence (plain text), or nothing in silent mode or the user's quiet time. */
  refusalText(session: Session, verdict: Verdict): string {
    if (this.#options.refusal === "silent" || this.#quiet.has(session)) return "";
    return say(session, `anon-notify.refused.${verdict}`);
  }

  /** Runs this guard before `command`'s own checks (authority included), so every attempt is recorded. */
  protect<C extends Command>(command: C): C {
    command.before(async (argv: Argv) => {
      const session = argv.session!;
      const verdict = await this.admit(session, fromPlatformEvent(argv), command.name, { args: argv.args ?? [], options: argv.options ?? {} });
      return verdict === "owner" ? undefined : reply(this.refusalText(session, verdict));
    });
    return command;
  }
}
