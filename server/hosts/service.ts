/** `StartService`: the one way a session is started on a host, for every surface (operator route,
 * `anon.new`, the console form, the triggers); waits a bounded time for the host's ACK. */
import { randomUUID } from "node:crypto";
import type { AuditActor } from "../../protocol/audit.ts";
import type { StartRequest, StartResult } from "../../protocol/hosts.ts";
import type { CommandSummary } from "../../protocol/queue.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { CommandStore } from "../queue/store.ts";
import { pickHost, startResult } from "./decisions.ts";
import type { HostRegistry } from "./registry.ts";

/** How long a start waits for the host's ACK before it answers "queued". */
export const START_WAIT_MS = 15_000;

/** A start job on its host's lane, not yet ACKed. */
type QueuedStart = { host: string; project: string; sessionId: string; command: CommandSummary };

export class StartService {
  readonly #hosts: HostRegistry;
  readonly #commands: CommandStore;
  readonly #waitMs: number;

  constructor(hosts: HostRegistry, commands: CommandStore, waitMs = START_WAIT_MS) {
    this.#hosts = hosts;
    this.#commands = commands;
    this.#waitMs = waitMs;
  }

  /** The online hosts' names and projects (for `anon.new`'s help and the console later). */
  hosts() {
    return this.#hosts.online().map((h) => ({ name: h.name, projects: h.projects.map((p) => p.name) }));
  }

  async start(request: StartRequest, actor: AuditActor): Promise<StartResult> {
    return this.settle(await this.queue(request, actor));
  }

  /** Picks the host and queues the job; the session's id is known from here on, before the host took it. */
  async queue(request: StartRequest, actor: AuditActor): Promise<QueuedStart> {
    const picked = pickHost(this.#hosts.online(), request.host, request.project);
    if ("error" in picked) throw new DomainError(picked.error);
    const sessionId = request.session_id ?? randomUUID();
    const limits = request.limits ? { limits: request.limits } : {};
    const approvals = request.approvals ? { approvals: request.approvals } : {};
    const command = await this.#commands.createStartJob(
      picked.host_id,
      { project: request.project, task: request.task, session_id: sessionId, ...limits, ...approvals },
      actor,
    );
    return { host: picked.name, project: request.project, sessionId, command };
  }

  async settle(queued: QueuedStart): Promise<StartResult> {
    const final = await this.#commands.waitFinal(queued.command.command_id, this.#waitMs);
    const payload = final.state === "accepted" ? await this.#commands.payloadOf(final.command_id) : null;
    return startResult(queued.host, queued.project, queued.sessionId, final, payload);
  }
}
