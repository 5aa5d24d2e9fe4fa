/** The recipient a paired Pi names: the configured one, else placeholders on a server that sends nothing. */
import type { DirectTarget } from "../handover/direct.ts";

/** Any two different 5–12 digit numbers pass the extension's recipient check; nothing is ever sent to these. */
export const TRIAL_QQ = { qq: "10001", anonQq: "20002" } as const;

/** The owner's QQ and the bot's own, or placeholders (differing from a configured owner) when there is no bot. */
export function pairedRecipient(owner: DirectTarget): { qq: string; anonQq: string; placeholder: boolean } {
  if (owner.botId !== "") {
    const anonQq = owner.botId.includes(":") ? owner.botId.slice(owner.botId.indexOf(":") + 1) : "";
    return { qq: owner.recipientId, anonQq, placeholder: false };
  }
  const qq = owner.recipientId || TRIAL_QQ.qq;
  return { qq, anonQq: qq === TRIAL_QQ.anonQq ? TRIAL_QQ.qq : TRIAL_QQ.anonQq, placeholder: true };
}
