/** What every chat command shares; commands register through `ownerCommand`, so none can skip the owner guard. */
import type { Argv, Command, Context, Fragment, Session } from "koishi";
import type { SessionProjection } from "../../protocol/sessions.ts";
import type { GrantService } from "../approvals/grants.ts";
import type { ApprovalService } from "../approvals/service.ts";
import type { AuditLog } from "../audit/store.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { OperatorService } from "../operator/service.ts";
import type { OwnerGuard } from "./owner-guard.ts";
import { resolveRef, type SessionNumbers, type NumberedSession } from "./refs.ts";
import { reply, say } from "./words.ts";
import { errorText } from "../../common/errors.ts";

export interface ChatKit {
  guard: OwnerGuard;
  operator: OperatorService;
  approvals: Pick<ApprovalService, "decide" | "find" | "list" | "pendingPage" | "byRequestMessage">;
  grants: Pick<GrantService, "list" | "revoke">;
  audit: AuditLog;
  numbers: SessionNumbers;
}

/** A guarded `anon` command that never takes the quoted message as an argument, with strict options (a word starting with `-` is the owner's text), also
 * answering to its flat name (`anon_sessions`) for Telegram's menu. */
export function ownerCommand<D extends string>(ctx: Context, kit: ChatKit, declaration: D) {
  const command = kit.guard.protect(ctx.command(declaration, { captureQuote: false, strictOptions: true }));
  if (command.name.includes(".")) command.alias(flatName(command.name));
  return command;
}

/** An `ownerCommand` whose action runs through `asOwner`: its words are the reply, its refusals worded. */
export function ownerAction<D extends string>(
  ctx: Context,
  kit: ChatKit,
  declaration: D,
  action: (argv: Argv & { session: Session }, ...args: Argv.ArgumentType<D>) => Promise<string>,
): Command {
  return ownerCommand(ctx, kit, declaration).action((argv, ...args) =>
    asOwner(ctx, kit, argv.session!, () => action(argv as Argv & { session: Session }, ...args)),
  );
}

export const flatName = (name: string) => name.replace(/\./g, "_");

/** A sentence (plain text) for a refusal the owner can act on; anything unexpected is logged and named briefly. */
export function refusalText(ctx: Context, session: Session, error: unknown): string {
  if (error instanceof ChatRefusal) return error.message;
  if (error instanceof DomainError) {
    const detail = error.issues?.map((issue) => `${issue.path}: ${issue.message}`).join("; ") ?? "";
    const key = `anon-notify.errors.${error.code}`;
    const text = say(session, key, [detail]);
    return text === key ? say(session, "anon-notify.errors.unknown", [error.code]) : text;
  }
  ctx.logger("notify-webhook").warn(error);
  return say(session, "anon-notify.errors.unknown", [errorText(error)]);
}

/** A refusal already worded for the owner (an unknown session reference, an unreadable duration). */
export class ChatRefusal extends Error {
  override name = "ChatRefusal";
}

/** Runs an owner's action as the `operator`, answering refusals with words instead of throwing; the words become the message here. */
export async function asOwner(ctx: Context, kit: ChatKit, session: Session, action: () => Promise<string>): Promise<Fragment> {
  try {
    return reply(await kit.audit.as("operator", action));
  } catch (error) {
    return reply(refusalText(ctx, session, error));
  }
}

/** A session's project as a row shows it: flagged, in the reader's language, when its letters mix scripts. */
export const projectName = (session: Session, s: SessionProjection) => (s.mixed_scripts ? s.project + say(session, "anon-notify.mixed-scripts") : s.project);

export const sessionName = (session: Session, { number, session: s }: NumberedSession): string => `#${number} ${projectName(session, s)}`;

export const numbered = (kit: ChatKit): NumberedSession[] => kit.numbers.number(kit.operator.onlineSessions());

export function sessionLabel(kit: ChatKit, session: Session, sessionId: string): string {
  const online = numbered(kit).find((s) => s.session.session_id === sessionId);
  return online ? sessionName(session, online) : sessionId.slice(0, 8);
}

export const chatDecider = (session: Session) => ({ actor: "operator" as const, name: `chat:${session.platform}:${session.userId ?? ""}` });

/** The message an owner's reply quotes; a stranger's quote goes on like any other message (nothing tells them which messages matter here). */
export const ownerQuote = (kit: ChatKit, session: Session) =>
  !session.quote?.id || session.argv?.command || !kit.guard.isOwner(session) ? undefined : session.quote.id;

/** The online session `ref` names, or a `ChatRefusal` saying how to name one. */
export function sessionByRef(kit: ChatKit, session: Session, ref: string): NumberedSession {
  const sessions = numbered(kit);
  if (sessions.length === 0) throw new ChatRefusal(say(session, "anon-notify.session-ref.none-online"));
  const found = resolveRef(ref, sessions);
  if (found.kind === "found") return { number: found.number, session: found.session };
  if (found.kind === "none") throw new ChatRefusal(say(session, "anon-notify.session-ref.none", [ref]));
  const list = found.candidates.map((c) => sessionName(session, c)).join(", ");
  throw new ChatRefusal(say(session, "anon-notify.session-ref.ambiguous", [ref, list]));
}
