/** A push route's worker: one receipt per push, published one at a time in its own queue, so an outage
 * delays only pushes. */
import type { Context } from "koishi";
import { backoffDelayMs } from "../../common/backoff.ts";
import { errorText } from "../../common/errors.ts";
import { kickLoop } from "../../common/kick-loop.ts";
import { EventBody } from "../../protocol/events.ts";
import type { PushHealth, PushReceipt } from "../../protocol/push.ts";
import type { ApprovalRecord } from "../approvals/decisions.ts";
import { voiceOf } from "../approvals/message-rules.ts";
import type { ApprovalStore } from "../approvals/store.ts";
import type { AuditLog } from "../audit/store.ts";
import type { EventStore } from "../events/store.ts";
import { instanceSay, type Say } from "../locales/load.ts";
import type { UrgentKind } from "../mute/decisions.ts";
import type { MuteStore } from "../mute/store.ts";
import type { PushAnswers } from "./answers.ts";
import { pushError, type PublishOutcome } from "./ntfy.ts";
import { approvalPush, eventPush, pushPlan, type PushMessage } from "./render-rules.ts";
import type { PushRow, PushStore } from "./store.ts";

export interface PusherDeps {
  store: PushStore;
  events: Pick<EventStore, "get">;
  approvals: Pick<ApprovalStore, "get" | "openFor">;
  audit: AuditLog;
  route: PushRow["route"];
  send(message: PushMessage): Promise<PublishOutcome>;
  /** Mints the Approve and Deny URLs; absent without a public base URL or on a notify-only route. */
  answers: PushAnswers | undefined;
  /** The console page's address for a `view` action, when known. */
  consoleUrl: () => string | undefined;
  noBot: boolean;
  completions: boolean;
  mute: { store: MuteStore; breakThrough: readonly UrgentKind[] };
  maxAttempts: number;
  /** The first wait after a failure without `Retry-After`; it doubles up to 60 s. */
  retryDelayMs: number;
  random?: () => number;
}

export class Pusher {
  readonly #ctx: Context;
  readonly #deps: PusherDeps;
  readonly #say: Say;
  readonly #queue: string[] = [];
  #stopped = false;
  #wake: (() => void) | undefined;

  constructor(ctx: Context, deps: PusherDeps) {
    this.#ctx = ctx;
    this.#deps = deps;
    this.#say = instanceSay(ctx);
    ctx.on("dispose", () => {
      this.#stopped = true;
      this.#wake?.();
    });
  }

  get route() {
    return this.#deps.route;
  }

  async load(): Promise<void> {
    for (const row of await this.#deps.store.pending(this.#deps.route)) this.#enqueue(row.push_id);
  }

  /** An accepted notice: pushed if the server's plan says so (once per event id). */
  async offerEvent(eventId: string): Promise<void> {
    const mute = this.#deps.mute;
    await mute.store.loaded;
    const planned = await this.#plan(eventId, (sessionId) => mute.store.isMuted(sessionId), mute.breakThrough);
    if (planned) await this.#claim("event", eventId, planned.event.session_id);
  }

  async #plan(eventId: string, muted: (sessionId: string) => boolean, breakThrough: readonly UrgentKind[]) {
    const row = await this.#deps.events.get(eventId);
    if (!row) return undefined;
    const event = EventBody.parse(JSON.parse(row.body));
    const { noBot, completions } = this.#deps;
    const plan = pushPlan(event, { noBot, completions, muted: muted(event.session_id), breakThrough });
    return plan ? { event, plan } : undefined;
  }

  /** Approvals changed: every open request nobody answered yet (and no grant decided) is pushed once. */
  async offerApprovals(): Promise<void> {
    for (const record of await this.#deps.approvals.openFor({})) {
      if (record.state === "pending" && !record.grant_id) await this.#claim("approval", record.approval_id, record.session_id);
    }
  }

  async receipt(eventId: string): Promise<PushReceipt | null> {
    const row = await this.#deps.store.get(`${this.#deps.route}:event:${eventId}`);
    return row ? { route: row.route, state: row.state, attempts: row.attempts, error: row.error, updated_at: new Date(row.updated_at).toISOString() } : null;
  }

  async health(): Promise<PushHealth> {
    const row = await this.#deps.store.newest(this.#deps.route);
    return {
      route: this.#deps.route,
      // Whether the push can carry Approve and Deny buttons.
      answers: this.#deps.answers ? "buttons" : "text",
      last: row ? { state: row.state, error: row.error, at: new Date(row.updated_at).toISOString() } : null,
    };
  }

  async #claim(kind: PushRow["kind"], subject: string, sessionId: string): Promise<void> {
    const now = new Date();
    const route = this.#deps.route;
    const pushId = `${route}:${kind}:${subject}`;
    const row = { push_id: pushId, route, kind, subject, session_id: sessionId, state: "queued", attempts: 0, error: null, message_id: null } as const;
    if (await this.#deps.store.claim({ ...row, created_at: now, updated_at: now })) this.#enqueue(pushId);
  }

  #enqueue(pushId: string): void {
    if (!this.#queue.includes(pushId)) this.#queue.push(pushId);
    void this.#drain();
  }

  readonly #drain = kickLoop(
    async () => {
      while (!this.#stopped && this.#queue.length > 0) {
        const pushId = this.#queue[0]!;
        try {
          await this.#work(pushId);
        } catch (error) {
          if (this.#stopped) return;
          this.#ctx.logger("notify-webhook").warn(this.#say("anon-notify.push.log.store", { id: pushId, error: errorText(error) }));
        }
        this.#queue.shift();
      }
    },
    () => {},
  );

  /** Publishes one push until it is delivered, refused, out of attempts, or no longer wanted. */
  async #work(pushId: string): Promise<void> {
    const { store } = this.#deps;
    for (;;) {
      const row = await store.get(pushId);
      if (this.#stopped || !row || (row.state !== "queued" && row.state !== "retrying")) return;
      const built = await this.#message(row);
      if ("ended" in built) {
        await this.#finish(row, "failed", pushError(this.#say, "approval_ended", row.subject), null, null);
        return;
      }
      const attempts = row.attempts + 1;
      const outcome = await this.#deps.send(built.message);
      if (outcome.kind === "delivered") {
        await this.#finish({ ...row, attempts }, "delivered", null, outcome.messageId, built.message);
        return;
      }
      const more = row.kind === "approval" ? built.open : attempts < this.#deps.maxAttempts;
      if (outcome.kind === "refused" || !more) {
        const gaveUp = outcome.kind === "retry" ? this.#say("anon-notify.delivery-errors.gave-up", [attempts]) : "";
        await this.#finish({ ...row, attempts }, "failed", pushError(this.#say, outcome.code, outcome.detail) + gaveUp, null, built.message);
        return;
      }
      const delayMs = outcome.retryAfterMs ?? backoffDelayMs(attempts, this.#deps.retryDelayMs, this.#deps.random ?? Math.random);
      const error = pushError(this.#say, outcome.code, outcome.detail, delayMs);
      await store.update(pushId, { state: "retrying", attempts, error, updated_at: new Date() });
      await this.#audit("push.retrying", row, { attempt: attempts, error, delay_ms: delayMs });
      this.#ctx.logger("notify-webhook").debug("push %s: %s", pushId, error);
      await this.#sleep(delayMs);
    }
  }

  /** The message to publish now (an approval's with fresh single-use answer URLs), or why there is none. */
  async #message(row: PushRow): Promise<{ message: PushMessage; open: boolean } | { ended: true }> {
    if (row.kind === "event") {
      // The mute was judged when the notice came; the plan is read again only for its priority.
      const planned = await this.#plan(row.subject, () => false, []);
      return planned ? { message: eventPush(planned.event, planned.plan, this.#say), open: true } : { ended: true };
    }
    const record = await this.#deps.approvals.get(row.subject);
    if (record?.state !== "pending" || Date.now() >= new Date(record.expires_at).getTime()) return { ended: true };
    return { message: approvalPush(record, new Date(), voiceOf(this.#say), await this.#links(record)), open: true };
  }

  async #links(record: ApprovalRecord) {
    const answers = this.#deps.answers;
    if (!answers) {
      const console = this.#deps.consoleUrl();
      return console ? { console } : {};
    }
    const expires = new Date(record.expires_at);
    return {
      answer: { approve: await answers.mint(record.approval_id, "approved", expires), deny: await answers.mint(record.approval_id, "rejected", expires) },
    };
  }

  async #finish(row: PushRow, state: "delivered" | "failed", error: string | null, messageId: string | null, message: PushMessage | null): Promise<void> {
    await this.#deps.store.update(row.push_id, { state, attempts: row.attempts, error, message_id: messageId, updated_at: new Date() });
    // The exact words pushed, never the answer URLs: they are capabilities.
    const text = message ? { title: message.title, message: message.message, priority: message.priority, tags: message.tags } : null;
    await this.#audit(`push.${state}`, row, { attempt: row.attempts, error, message_id: messageId, push: text });
    if (state === "failed") this.#ctx.logger("notify-webhook").warn(this.#say("anon-notify.push.log.failed", { id: row.push_id, error }));
  }

  #audit(action: string, row: PushRow, data: Record<string, unknown>): Promise<void> {
    return this.#deps.audit.record({
      actor: "server",
      action,
      session_id: row.session_id,
      subject: row.subject,
      data: { push_id: row.push_id, route: row.route, ...data },
    });
  }

  #sleep(ms: number): Promise<void> {
    if (this.#stopped) return Promise.resolve();
    return new Promise((resolve) => {
      const cancel = this.#ctx.setTimeout(() => {
        this.#wake = undefined;
        resolve();
      }, ms);
      this.#wake = () => {
        cancel();
        resolve();
      };
    });
  }
}
