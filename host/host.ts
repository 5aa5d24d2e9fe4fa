/** The host process: registers, heartbeats and long-polls its `host` lane, turning each start job into a
 * Pi session; the journal is written before Pi starts and before the ACK, so nothing starts twice. */
import { createHash } from "node:crypto";
import { hostname } from "node:os";
import { errorText } from "../common/errors.ts";
import { HOST_PROTOCOL, type HostHeartbeat, HostHeartbeatAnswer, StartPayload } from "../protocol/hosts.ts";
import { OfflineAnswer } from "../protocol/sessions.ts";
import { AckAnswer, ClaimAnswer, type ClaimedCommand, type StartRefusal } from "../protocol/queue.ts";
import type { CommandJournal } from "../extension/command-channel/journal.ts";
import { createRuntimeId } from "../extension/presence/presence.ts";
import type { WebhookClient } from "../extension/server-client/http-client.ts";
import { asServerError, realSleep, retryDelayMs, runWithRetry } from "../extension/server-client/retry.ts";
import { decideStart, type Root } from "./path-rules.ts";
import { type PiCommand, type RunningSession, startSession } from "./pi-process.ts";
import { listProjects, locateProject } from "./projects.ts";

const CLAIM_WAIT_MS = 20_000;
const CLAIM_MARGIN_MS = 5_000;
const RETRY_BASE_MS = 500;
const RETRY_MAX_MS = 10_000;

export interface HostOptions {
  client: WebhookClient;
  journal: CommandJournal;
  roots: Root[];
  name: string;
  /** The Pi to run, or null when none was found (every start is then refused `pi_not_found`). */
  pi: PiCommand | null;
  maxSessions: number;
  env: NodeJS.ProcessEnv;
  log: (line: string) => void;
}

export class Host {
  readonly id: string;
  readonly runtimeId = createRuntimeId();
  readonly #options: HostOptions;
  readonly #sessions = new Map<string, RunningSession>();
  readonly #stop = new AbortController();
  #ttlMs = 30_000;

  constructor(options: HostOptions) {
    this.#options = options;
    // Stable for one machine and one set of roots, so a restarted host gets back the jobs queued for it.
    const digest = createHash("sha256").update(JSON.stringify([hostname(), options.name, options.roots.map((r) => r.real).sort()]));
    this.id = `host-${digest.digest("hex").slice(0, 24)}`;
  }

  /** Runs until `stop()`: heartbeats beside one claim loop; then signs off, so a restart is not refused `session_in_use`. */
  async run(): Promise<void> {
    await this.#register();
    const beats = this.#heartbeats();
    await this.#claims();
    await beats;
    const body = { host_id: this.id, runtime_id: this.runtimeId };
    await this.#options.client
      .request("POST", "hosts/offline", { body, timeoutMs: 2_000, schema: OfflineAnswer })
      .catch((error: unknown) => this.#options.log(`sign-off failed (the name is free once the heartbeat expires): ${errorText(error)}`));
  }

  /** Stops claiming and heartbeating and ends the sessions it started (their files stay, to be resumed at the terminal). */
  stop(): void {
    this.#stop.abort();
    for (const session of this.#sessions.values()) session.child.kill("SIGTERM");
  }

  /** The first heartbeat, retried: the host claims nothing before the server knows this runtime. */
  async #register(): Promise<void> {
    for (let failures = 1; !this.#stop.signal.aborted; failures++) {
      try {
        await this.#beat();
        this.#options.log(`registered as ${this.#options.name} (${this.id})`);
        return;
      } catch (error) {
        await this.#retryLater("registration", error, failures);
      }
    }
  }

  async #beat(): Promise<void> {
    const { name, pi, maxSessions, roots, client } = this.#options;
    const body: HostHeartbeat = {
      host_id: this.id,
      runtime_id: this.runtimeId,
      name,
      pi: { command: pi ? [pi.program, ...pi.args].join(" ").slice(0, 1024) : "pi", version: null },
      projects: listProjects(roots),
      max_sessions: maxSessions,
      sessions: [...this.#sessions.keys()],
      host_protocol: HOST_PROTOCOL,
    };
    this.#ttlMs = (await client.request("POST", "hosts/heartbeat", { body, timeoutMs: 10_000, schema: HostHeartbeatAnswer })).ttl_ms;
  }

  async #heartbeats(): Promise<void> {
    while (!this.#stop.signal.aborted) {
      await realSleep(Math.max(200, Math.floor(this.#ttlMs / 3)), this.#stop.signal).catch(() => {});
      if (this.#stop.signal.aborted) return;
      await this.#beat().catch((error: unknown) => this.#options.log(`heartbeat failed: ${errorText(error)}`));
    }
  }

  async #claims(): Promise<void> {
    for (let failures = 0; !this.#stop.signal.aborted; ) {
      try {
        const answer = await this.#options.client.request("GET", "commands", {
          query: { session_id: this.id, runtime_id: this.runtimeId, lane: "host", wait_ms: CLAIM_WAIT_MS },
          timeoutMs: CLAIM_WAIT_MS + CLAIM_MARGIN_MS,
          schema: ClaimAnswer,
          signal: this.#stop.signal,
        });
        failures = 0;
        if (answer.command) await this.#handle(answer.command, answer.lease.token);
      } catch (error) {
        if (this.#stop.signal.aborted) return;
        // The server lost this runtime (its restart, a TTL): registered again before the next claim.
        if (asServerError(error).code === "session_offline") await this.#beat().catch(() => {});
        await this.#retryLater("claim", error, ++failures);
      }
    }
  }

  /** Tells a failure, then waits its retry delay (capped) or until `stop()`. */
  async #retryLater(what: string, error: unknown, failures: number): Promise<void> {
    const wait = Math.min(retryDelayMs(asServerError(error), failures, RETRY_BASE_MS, Math.random), RETRY_MAX_MS);
    this.#options.log(`${what} failed, retrying in ${wait} ms: ${errorText(error)}`);
    await realSleep(wait, this.#stop.signal).catch(() => {});
  }

  /** One start job: decided, journaled and started, then ACKed with what it came to. */
  async #handle(command: ClaimedCommand, leaseToken: string): Promise<void> {
    const { journal, pi, roots, maxSessions, env, log } = this.#options;
    const parsed = StartPayload.safeParse(command.payload);
    if (command.kind !== "start" || !parsed.success) return this.#ack(command, leaseToken, "start_failed");
    const job = parsed.data;
    const decision = decideStart({
      journaled: journal.has(command.command_id),
      project: locateProject(job.project, roots),
      piFound: pi !== null,
      running: this.#sessions.size,
      maxSessions,
    });
    // Journaled "started" only once Pi took the task: anything else stopped half-way and is not tried again.
    if (decision.kind === "ack_again")
      return this.#ack(command, leaseToken, journal.applied(command.command_id).outcome === "started" ? undefined : "start_failed");
    if (decision.kind === "refuse") {
      log(`refused ${command.command_id} (${job.project}): ${decision.refusal}`);
      return this.#ack(command, leaseToken, decision.refusal);
    }
    const record = (outcome?: "started" | "refused") =>
      journal.record({ command_id: command.command_id, session_id: this.id, event_id: command.event_id, delivered_at: new Date().toISOString(), outcome });
    await record();
    try {
      const session = await startSession(pi!, decision.cwd, job, env);
      this.#sessions.set(job.session_id, session);
      void session.exited.then(() => this.#sessions.delete(job.session_id));
      await record("started");
      log(`started session ${job.session_id} in ${decision.cwd}`);
    } catch (error) {
      log(`could not start ${job.project}: ${errorText(error)}`);
      await record("refused");
      return this.#ack(command, leaseToken, "start_failed");
    }
    return this.#ack(command, leaseToken, undefined);
  }

  async #ack(command: ClaimedCommand, leaseToken: string, refusal: StartRefusal | undefined): Promise<void> {
    const body = {
      session_id: this.id,
      runtime_id: this.runtimeId,
      lease_token: leaseToken,
      outcome: refusal ? "refused" : "started",
      ...(refusal ? { refusal } : {}),
    };
    const acked = await runWithRetry(
      () => this.#options.client.request("POST", `commands/${encodeURIComponent(command.command_id)}/ack`, { body, timeoutMs: 10_000, schema: AckAnswer }),
      { maxAttempts: 3, backoffMs: RETRY_BASE_MS, sleep: realSleep, random: Math.random },
    );
    if (!acked.ok) this.#options.log(`ACK of ${command.command_id} failed: ${errorText(acked.error)}`);
  }
}
