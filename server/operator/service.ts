/** The operator service, for every surface: list sessions, queue, list and cancel instructions, stop a run,
 * read the audit trail. Refusals are `DomainError`s each surface words its own way. */
import type { AuditActor, AuditPage, AuditQuery } from "../../protocol/audit.ts";
import { CONTROL_PROTOCOL, type CommandOrigin, type CommandSummary } from "../../protocol/queue.ts";
import type { MuteEntry, OperatorCommandCreated, OperatorCreateCommand, OperatorSessionList, OperatorSessionsQuery } from "../../protocol/operator.ts";
import type { SessionProjection } from "../../protocol/sessions.ts";
import type { AuditLog } from "../audit/store.ts";
import { summarize } from "../queue/decisions.ts";
import type { CommandStore } from "../queue/store.ts";
import { DomainError } from "../../common/domain-error.ts";
import { muteUntil } from "../mute/decisions.ts";
import type { MuteStore } from "../mute/store.ts";
import { pageSessions, supportsImages, type SessionRegistry } from "../sessions/registry.ts";

export interface OperatorDeps {
  registry: SessionRegistry;
  commands: CommandStore;
  audit: AuditLog;
  mutes: MuteStore;
  /** The session a received notice event belongs to; `undefined` when no such event exists. */
  eventSession(eventId: string): Promise<string | undefined>;
  /** Notices queued for the persona, and how many of all a mute holds now. */
  eventsWaiting(): Promise<{ persona: number; held: number }>;
  /** The notices delivered as the platform message `messageId`, newest first. */
  messageNotices(messageId: string): Promise<NoticeRef[]>;
}

type NoticeRef = { event_id: string; session_id: string };

/** How many of the newest commands a short command id is looked up in. */
const COMMAND_LOOKUP_WINDOW = 500;

/** `event_id` present: an answer to that notice (`agent_command`), else a message to an online session; `request_key` is already namespaced by the
 * surface it came from, `null` for no idempotency. */
type CommandRequest = Omit<OperatorCreateCommand, "request_key"> & { request_key: string | null; origin: CommandOrigin };

export class OperatorService {
  readonly #deps: OperatorDeps;

  constructor(deps: OperatorDeps) {
    this.#deps = deps;
  }

  /** Every online session, most recently seen first (for surfaces that show them all at once). */
  onlineSessions(): SessionProjection[] {
    return this.#deps.registry.list();
  }

  sessions(page: OperatorSessionsQuery): OperatorSessionList {
    return pageSessions(this.#deps.registry.list(), page.cursor, page.limit);
  }

  /** Queues an instruction. With an event id the notice must belong to the session, which may be offline; without one the session must be online now. A
   * repeated request key returns the stored command before these checks, so a retry still gets its answer. */
  async createCommand(request: CommandRequest): Promise<OperatorCommandCreated> {
    const { registry, commands, eventSession } = this.#deps;
    const images = request.images ?? [];
    const admit = async () => {
      const live = registry.find(request.session_id);
      if (request.event_id !== undefined) {
        const owner = await eventSession(request.event_id);
        if (owner === undefined) throw new DomainError("not_found");
        if (owner !== request.session_id) throw new DomainError("event_session_mismatch");
      } else if (!live) {
        throw new DomainError("session_offline");
      }
      // A client known not to take images would leave the command pending forever.
      if (images.length > 0 && live && !supportsImages(live.heartbeat)) throw new DomainError("images_not_supported");
    };
    const { record, duplicate } = await commands.create(
      {
        session_id: request.session_id,
        event_id: request.event_id ?? null,
        origin: request.origin,
        instruction: request.instruction,
        images,
        request_key: request.request_key,
      },
      admit,
    );
    return { command: summarize(record), duplicate };
  }

  /** Works for offline sessions too: what is stored can always be looked at. */
  commands(sessionId: string, limit: number): Promise<CommandSummary[]> {
    return this.#deps.commands.list(sessionId, limit);
  }

  /** The recent commands whose id starts with `prefix` (with or without the `c-`), newest first. */
  async findCommands(prefix: string): Promise<CommandSummary[]> {
    const wanted = prefix.toLowerCase().replace(/^c-/, "");
    const recent = await this.#deps.commands.list(undefined, COMMAND_LOOKUP_WINDOW);
    return recent.filter((command) => command.command_id.toLowerCase().replace(/^c-/, "").startsWith(wanted));
  }

  /** The notices a message the owner answers was delivered as (several for a digest). */
  noticesOfMessage(messageId: string): Promise<NoticeRef[]> {
    return this.#deps.messageNotices(messageId);
  }

  cancel(sessionId: string, commandId: string): Promise<CommandSummary> {
    return this.#deps.commands.cancel(sessionId, commandId);
  }

  /** The server at a glance, for `anon.status` and the console: `pending` counts instructions pending or leased, `waiting` the notices queued for the
   * persona (held ones included). */
  async status() {
    const sessions = this.onlineSessions();
    const [pending, events] = await Promise.all([this.#deps.commands.countActive(), this.#deps.eventsWaiting()]);
    return {
      sessions: sessions.length,
      running: sessions.filter((s) => s.state === "running").length,
      pending,
      mutes: this.mutes(),
      waiting: events.persona,
      held: events.held,
    };
  }

  mutes(): MuteEntry[] {
    return this.#deps.mutes
      .running()
      .sort((a, b) => (a.session_id === null ? -1 : b.session_id === null ? 1 : a.until.getTime() - b.until.getTime()))
      .map((mute) => ({ session_id: mute.session_id, until: mute.until.toISOString() }));
  }

  /** Mutes one session (or all with `null`) for `minutes` from now; setting it again moves its end. */
  async mute(sessionId: string | null, minutes: number | undefined): Promise<MuteEntry> {
    const mute = await this.#deps.mutes.mute(sessionId, muteUntil(new Date(), minutes));
    const entry = { session_id: mute.session_id, until: mute.until.toISOString() };
    await this.#deps.audit.record({ action: "mute.set", session_id: sessionId, data: entry });
    return entry;
  }

  onMuteEnd(listener: () => void): () => void {
    return this.#deps.mutes.onEnd(listener);
  }

  /** Ends one session's mute (or every mute with `null`); the notices held are then released as a digest. */
  async unmute(sessionId: string | null): Promise<number> {
    const ended = await this.#deps.mutes.unmute(sessionId);
    if (ended > 0) await this.#deps.audit.record({ action: "mute.ended", session_id: sessionId, data: { session_id: sessionId, ended } });
    return ended;
  }

  /** Queues a stop for the run in progress; a session that is offline or below command protocol 3 is refused now rather than left waiting. */
  async requestStop(sessionId: string, actor: AuditActor): Promise<CommandSummary> {
    const live = this.#deps.registry.find(sessionId);
    if (!live) throw new DomainError("session_offline");
    const protocol = live.heartbeat.command_protocol;
    if (protocol < CONTROL_PROTOCOL) {
      const message = `the session's anon-notify extension speaks command protocol ${protocol}; stopping a run remotely needs ${CONTROL_PROTOCOL} (update the extension)`;
      throw new DomainError("capability_missing", { issues: [{ path: "session_id", message }] });
    }
    return this.#deps.commands.createControlCommand(sessionId, "stop", {}, actor);
  }

  waitForCommandOutcome(commandId: string, timeoutMs: number): Promise<CommandSummary> {
    return this.#deps.commands.waitFinal(commandId, timeoutMs);
  }

  audit(query: AuditQuery): Promise<AuditPage> {
    return this.#deps.audit.query(query);
  }
}
