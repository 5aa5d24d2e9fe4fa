/** The session bound now and the views the parts read of it, each read at the moment of use so no part
 * holds a session that was replaced or switched off. */
import type { ApprovalSession } from "../approvals/asking.ts";
import type { Messages } from "../texts/messages.ts";
import { sampleNoticeContext, type NoticeTarget } from "../notices/hand-over.ts";
import type { Connection } from "../presence/presence.ts";
import { notifying, type SessionState } from "./session.ts";

export class CurrentSession {
  readonly runtimeId: string;
  /** Before a session is bound: the config's language or the locale's. */
  readonly #early: Messages;
  /** The bound session; undefined before session_start and after shutdown. */
  state: SessionState | undefined;

  constructor(runtimeId: string, early: Messages) {
    this.runtimeId = runtimeId;
    this.#early = early;
  }

  readonly text = (): Messages => this.state?.text ?? this.#early;

  /** Where the session's notices go; undefined while it does not notify. */
  readonly target = (): NoticeTarget | undefined => {
    const s = this.state;
    if (!notifying(s)) return undefined;
    const sample = () => sampleNoticeContext(s.ctx, s.sessionId, this.runtimeId, s.config, s.text);
    return { config: s.config, notifier: s.delivery.notifier, sample, context: () => sample()() };
  };

  /** The client and configuration the session services use; undefined without a valid config and delivery. */
  readonly connection = (): Connection | undefined => {
    const s = this.state;
    return s?.config && s.delivery ? { client: s.delivery.client, config: s.config } : undefined;
  };

  /** The session as the approval gate needs it; asking the owner from chat needs it switched on. */
  readonly approvals = (): ApprovalSession | undefined => {
    const s = this.state;
    if (!s?.config) return undefined;
    return {
      ctx: s.ctx,
      sessionId: s.sessionId,
      config: s.config,
      client: notifying(s) ? s.delivery.client : undefined,
      chat: s.recipientNote !== "no_chat",
      subagent: s.subagent,
      notices: this.target(),
    };
  };
}
