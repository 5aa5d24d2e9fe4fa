/** `StartService`: the one way a session is started on a host, for every surface; waits a bounded time for
 * the host's ACK. */
import { randomUUID } from "node:crypto";
import type { AuditActor } from "../../protocol/audit.ts";
import type { CreateSessionBody, StartResult } from "../../protocol/hosts.ts";
import { DomainError } from "../../common/domain-error.ts";
import type { CommandStore } from "../queue/store.ts";
import { pickHost, startResult } from "./decisions.ts";
import type { HostRegistry } from "./registry.ts";

/** How long a start waits for the host's ACK before it answers "queued". */
export const START_WAIT_MS = 15_000;

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

  async start(request: CreateSessionBody, actor: AuditActor): Promise<StartResult> {
    const picked = pickHost(this.#hosts.online(), request.host, request.project);
    if ("error" in picked) throw new DomainError(picked.error);
    const sessionId = randomUUID();
    const { project, task, limits } = request;
    const queued = await this.#commands.createStartJob(picked.host_id, { project, task, session_id: sessionId, ...(limits ? { limits } : {}) }, actor);
    const final = await this.#commands.waitFinal(queued.command_id, this.#waitMs);
    const payload = final.state === "accepted" ? await this.#commands.payloadOf(final.command_id) : null;
    return startResult(picked.name, request.project, sessionId, final, payload);
  }
}
