/** The owner answers approvals from the chat (`anon.approve`, `anon.deny`, a quoted reply with 同意 / 拒绝)
 * through ApprovalService, so the first answer wins wherever it came from; a quote is never an instruction. */
import type { Context, Session } from "koishi";
import { APPROVAL_LIMITS, type Approval, type ApprovalDecision } from "../../protocol/approvals.ts";
import { z } from "zod";
import { actionText, durationText, grantedText, oneLine, shownCommand, voiceOf, wholeCommandTexts, WORDED_VIAS } from "../approvals/message-rules.ts";
import { sessionSay } from "../locales/load.ts";
import { parseDuration } from "../mute/decisions.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { PersonDecision } from "../approvals/service.ts";
import { koishi } from "../koishi.ts";
import { plainText } from "./images.ts";
import { ChatRefusal, asOwner, chatDecider, ownerAction, ownerQuote, sessionLabel, type ChatKit } from "./kit.ts";
import { typedTail } from "./typed.ts";
import { reply, say } from "./words.ts";

const LISTED = 10;
const LISTED_COMMAND_CHARS = 60;

/** Words that approve: they must stand alone, so "同意吗" or "yes but…" never approves. */
const APPROVE_WORDS = ["同意", "批准", "yes", "y", "approve"];
/** Words that deny, longest first; a reason may follow. */
const DENY_WORDS = ["不同意", "拒绝", "deny", "no", "n"];
const EDGE = /^[\s\p{P}]+|[\s\p{P}]+$/gu;

/** What a reply to an approval request decides, or null when it is not a clear yes or no; full-width letters and case do not matter, and a Latin word
 * must end at a space or punctuation ("nope" is no "no"). */
export function replyDecision(text: string): { decision: ApprovalDecision; reason: string | null } | null {
  const normal = text.normalize("NFKC").trim();
  const lower = normal.toLowerCase();
  if (APPROVE_WORDS.includes(lower.replace(EDGE, ""))) return { decision: "approved", reason: null };
  for (const word of DENY_WORDS) {
    if (!lower.startsWith(word)) continue;
    const rest = normal.slice(word.length);
    if (/^[a-z]/.test(word) && rest !== "" && !/^[\s\p{P}]/u.test(rest)) continue;
    return { decision: "rejected", reason: clip(rest.replace(EDGE, "")) };
  }
  return null;
}

function clip(reason: string | undefined): string | null {
  const text = (reason ?? "").trim();
  return text ? [...text].slice(0, APPROVAL_LIMITS.reasonChars).join("") : null;
}

/** What an approval became, in words: "已在终端批准", "超时无人回答，按拒绝处理", …. */
export function resultText(session: Session, approval: Approval): string {
  const via = approval.via && WORDED_VIAS.has(approval.via) ? say(session, `anon-notify.approval.via.${approval.via}`) : "";
  if (approval.state === "decided") return say(session, `anon-notify.approval.result.decided-${approval.decision}`, { via });
  if (approval.state === "rejected" && approval.via === "aborted") return say(session, "anon-notify.approval.result.aborted");
  return say(session, `anon-notify.approval.result.${approval.state}`, { via });
}

/** Decides as the owner (with `grant_minutes`, also grants) and words the outcome; refusals become sentences saying what happened instead. */
export async function decide(kit: ChatKit, session: Session, answer: Omit<PersonDecision, "decider" | "via">): Promise<string> {
  const { ref, decision, reason } = answer;
  try {
    const { approval, grant } = await kit.approvals.decide({ ...answer, decider: chatDecider(session), via: "chat" });
    const voice = voiceOf(sessionSay(session));
    if (grant) return grantedText(approval, grant, voice);
    const why = reason ? say(session, "anon-notify.approval.with-reason", [reason]) : "";
    return say(session, `anon-notify.approval.${decision}`, { code: approval.code, action: actionText(approval, voice), reason: why });
  } catch (error) {
    // `not_grantable` and the like are worded by the error's own text (refusalText).
    if (!(error instanceof DomainError)) throw error;
    if (error.code === "not_found") throw new ChatRefusal(say(session, "anon-notify.approval.not-found", [ref]));
    if (error.code === "already_decided" || error.code === "approval_expired") {
      const approval = await kit.approvals.find(ref);
      const key = error.code === "already_decided" ? "already" : "expired";
      if (approval) throw new ChatRefusal(say(session, `anon-notify.approval.${key}`, { code: approval.code, result: resultText(session, approval) }));
    }
    throw error;
  }
}

/** How long a grant typed in the chat may be: whole minutes, at most the protocol's maximum (the server caps it further). */
const GrantMinutes = z.number().int().min(1).max(APPROVAL_LIMITS.grantMinutesMax);

function approvalLine(kit: ChatKit, session: Session, approval: Approval, nowMs: number): string {
  return say(session, "commands.anon.approvals.messages.line", {
    code: approval.code,
    session: sessionLabel(kit, session, approval.session_id),
    tool: oneLine(approval.tool),
    preview: shownCommand(approval, LISTED_COMMAND_CHARS).text,
    left: durationText(Date.parse(approval.expires_at) - nowMs, say(session, "anon-notify.locale")),
  });
}

export function approvalCommands(ctx: Context, kit: ChatKit): void {
  // `anon.approve CODE 30m [npm run]`: approve, and grant this exact call (or every call starting with those words) to its session for that long.
  ownerAction(ctx, kit, "anon.approve <code:string> [duration:string] [prefix:rawtext]", async (argv, code, duration, prefix) => {
    const { session } = argv;
    if (!code) return say(session, ".usage");
    if (duration === undefined) return decide(kit, session, { ref: code, decision: "approved" });
    const minutes = GrantMinutes.safeParse(parseDuration(duration));
    if (!minutes.success) throw new ChatRefusal(say(session, ".bad-duration", [duration, APPROVAL_LIMITS.grantMinutesMax]));
    // The prefix as the owner typed it (never parsed as markup a second time).
    const words = typedTail(argv, [code, duration], prefix);
    return decide(kit, session, { ref: code, decision: "approved", grant_minutes: minutes.data, grant_prefix: words ? words.split(/\s+/) : undefined });
  });

  ownerAction(ctx, kit, "anon.deny <code:string> [reason:rawtext]", async (argv, code, reason) =>
    code ? decide(kit, argv.session, { ref: code, decision: "rejected", reason: clip(typedTail(argv, [code], reason)) }) : say(argv.session, ".usage"),
  );

  // The whole command, in as many messages as it takes; agent text is sent as text, never as markup.
  ownerAction(ctx, kit, "anon.approval <code:string>", async ({ session }, code) => {
    if (!code) return say(session, ".usage");
    const approval = await kit.approvals.find(code);
    if (!approval) throw new ChatRefusal(say(session, "anon-notify.approval.not-found", [code]));
    const parts = wholeCommandTexts(approval, voiceOf(sessionSay(session)));
    for (const part of parts.slice(0, -1)) await session.send(koishi.h.text(part));
    return parts.at(-1)!;
  });

  // Many sessions may be waiting at once: a page at a time (`anon.approvals 2`), so every one can be found.
  ownerAction(ctx, kit, "anon.approvals [page:posint]", async ({ session }, page = 1) => {
    // Decided ones are only on their way to Pi: nothing is left for the owner to answer there.
    const { approvals, total } = await kit.approvals.pendingPage(page, LISTED);
    if (total === 0) return say(session, ".empty");
    const pages = Math.ceil(total / LISTED);
    const now = Date.now();
    const lines = approvals.map((a) => approvalLine(kit, session, a, now));
    const more = page < pages ? [say(session, ".more", { page: page + 1, pages })] : [];
    return [say(session, ".header", [total]), ...lines, ...more, say(session, ".footer")].join("\n");
  });

  // A reply quoting an approval request answers it; anything else in such a reply is not an instruction.
  // Ahead of other plugins' middleware (a persona's), which would otherwise also take the answer as chat.
  ctx.middleware(async (session, next) => {
    const quoted = ownerQuote(kit, session);
    if (!quoted) return next();
    const approval = await kit.approvals.byRequestMessage(quoted);
    if (!approval) return next();
    const content = session.content ?? "";
    const verdict = await kit.guard.admit(session, true, "approval-reply", { quote: quoted, content });
    if (verdict !== "owner") return reply(kit.guard.refusalText(session, verdict));
    const answer = replyDecision(plainText(content));
    if (!answer) return reply(say(session, "anon-notify.approval.reply-how", { code: approval.code }));
    return asOwner(ctx, kit, session, () => decide(kit, session, { ...answer, ref: approval.approval_id }));
  }, true);
}
