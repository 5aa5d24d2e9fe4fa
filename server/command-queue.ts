/**
 * The durable server-to-agent command queue (protocol 2) in Koishi's database, and its two agent
 * routes: `GET /commands` (claim at most one, long poll with `wait_ms`) and
 * `POST /commands/:command_id/ack`. Every state change is a conditional write guarded by what the
 * decision was made on (command-state.ts), so two claims can never lease the same command and a
 * cancel can never slip past a claim. Final commands stay as tombstones, so a cancelled command or
 * a used request key survives restarts.
 */
import { randomBytes, randomUUID } from "node:crypto";
import type { Context, Query } from "koishi";
import { type AuditActor } from "../protocol/audit.ts";
import { AckBody, ClaimQuery, type ClaimAnswer, type CommandImage, type CommandOrigin, type CommandSummary } from "../protocol/commands.ts";
import {
  ACTIVE_STATES,
  checkImages,
  claimedCommand,
  claimPatch,
  decideAck,
  decideCancel,
  decideCreate,
  expiryPatch,
  guardOf,
  pickClaim,
  requestDigest,
  rollbackPatch,
  summarize,
  type AckInput,
  type CommandRecord,
  type Transition,
} from "./command-state.ts";
import type { AuditLog } from "./audit.ts";
import { HttpError, json, parseWith, type HttpApi } from "./http.ts";
import { koishi } from "./koishi.ts";
import { supportsImages, type SessionRegistry } from "./session-registry.ts";

declare module "koishi" {
  interface Tables {
    anon_notify_command: CommandRecord;
  }
}

export const COMMAND_TABLE = "anon_notify_command";
const ID_LENGTH = 128;
/** Conditional writes that lost a race are decided again on a fresh read, a bounded number of times. */
const MAX_RACE_RETRIES = 5;
const LEASE_SWEEP_MAX_MS = 5_000;
/** Every column but the image bytes, for reads that never need them. */
const WITHOUT_IMAGES: (keyof CommandRecord)[] = [
  "seq", "command_id", "session_id", "event_id", "origin", "instruction", "image_count", "image_bytes", "image_digest",
  "request_key", "request_digest", "state", "lease_token", "lease_runtime_id", "lease_expires_at", "first_claimed_at",
  "deliveries", "created_at", "updated_at",
];

/**
 * minato's query types distribute over union-typed columns (so `state: ["pending", "leased"]`
 * does not type-check) and refuse `null` for columns that are not optional, although both are
 * valid queries at run time.
 */
function where(query: Partial<Record<keyof CommandRecord, unknown>>): Query<CommandRecord> {
  return query as Query<CommandRecord>;
}

export interface NewCommand {
  session_id: string;
  /** The notice this answers; `null` for a proactive or operator message, which gets `<origin>:<command_id>`. */
  event_id: string | null;
  origin: CommandOrigin;
  instruction: string;
  images: CommandImage[];
  /** Namespaced by the caller (persona tool call or operator key); `null`: no idempotency. */
  request_key: string | null;
}

export interface CommandStoreOptions {
  leaseMs: number;
  imageBudgetBytes: number;
  /** Receives every state change (never a lease token or image bytes). */
  audit?: AuditLog | undefined;
}

/**
 * Wakes long polls of one session when a command may have become claimable (created, ACKed, its
 * lease expired). A watch is taken before looking at the queue, so a command created between the
 * look and the wait still wakes it.
 */
export class CommandNotifier {
  readonly #watchers = new Map<string, Set<() => void>>();
  #closed = false;

  get closed(): boolean {
    return this.#closed;
  }

  watch(sessionId: string): { fired: Promise<void>; close(): void } {
    let fire = () => {};
    const fired = new Promise<void>((resolve) => (fire = resolve));
    if (this.#closed) {
      fire();
      return { fired, close: () => {} };
    }
    const set = this.#watchers.get(sessionId) ?? new Set();
    set.add(fire);
    this.#watchers.set(sessionId, set);
    return {
      fired,
      close: () => {
        set.delete(fire);
        if (set.size === 0 && this.#watchers.get(sessionId) === set) this.#watchers.delete(sessionId);
      },
    };
  }

  notify(sessionId: string): void {
    for (const fire of this.#watchers.get(sessionId) ?? []) fire();
  }

  /** Releases every held request (plugin dispose) and answers later watches at once. */
  close(): void {
    this.#closed = true;
    for (const set of this.#watchers.values()) for (const fire of set) fire();
    this.#watchers.clear();
  }
}

export class CommandStore {
  readonly notifier = new CommandNotifier();
  readonly #ctx: Context;
  readonly #options: CommandStoreOptions;
  #creations: Promise<unknown> = Promise.resolve();

  constructor(ctx: Context, options: CommandStoreOptions) {
    this.#ctx = ctx;
    this.#options = options;
    ctx.model.extend(
      COMMAND_TABLE,
      {
        seq: "unsigned",
        command_id: { type: "string", length: ID_LENGTH },
        session_id: { type: "string", length: ID_LENGTH },
        event_id: { type: "string", length: ID_LENGTH },
        origin: { type: "string", length: 16 },
        instruction: "text",
        images: "json",
        image_count: "unsigned",
        image_bytes: "unsigned",
        image_digest: { type: "string", length: 64, nullable: true },
        request_key: { type: "string", length: 640, nullable: true },
        request_digest: { type: "string", length: 64 },
        state: { type: "string", length: 16 },
        lease_token: { type: "string", length: 64, nullable: true },
        lease_runtime_id: { type: "string", length: ID_LENGTH, nullable: true },
        lease_expires_at: { type: "timestamp", nullable: true },
        first_claimed_at: { type: "timestamp", nullable: true },
        deliveries: "unsigned",
        created_at: "timestamp",
        updated_at: "timestamp",
      },
      { primary: "seq", autoInc: true, unique: ["command_id", "request_key"] },
    );
  }

  /**
   * Validates the images and queues the command, or returns the stored one for a repeated request
   * key. `admit` runs only for a new command, before the budget check, and refuses by throwing.
   * Creations run one at a time so the budget check and the request-key check hold until the
   * insert lands.
   */
  create(input: NewCommand, admit: () => Promise<void> = async () => {}): Promise<{ record: CommandRecord; duplicate: boolean }> {
    const check = checkImages(input.images);
    if (!check.ok) return Promise.reject(new HttpError(400, "invalid_image", { issues: check.issues }));
    const facts = check.facts;
    const run = this.#creations.then(async () => {
      const db = this.#ctx.database;
      const sameKey = input.request_key ? (await db.get(COMMAND_TABLE, { request_key: input.request_key }))[0] : undefined;
      if (!sameKey) await admit();
      const digest = requestDigest({ ...input, image_digest: facts.digest });
      const activeBytes = facts.bytes > 0 && !sameKey ? await this.activeImageBytes() : 0;
      const decision = decideCreate(sameKey, digest, activeBytes, facts.bytes, this.#options.imageBudgetBytes);
      if (decision.kind === "refuse") throw new HttpError(decision.status, decision.error);
      if (decision.kind === "reuse") return { record: decision.record, duplicate: true };
      const now = new Date();
      const commandId = `c-${randomUUID()}`;
      const record = await db.create(COMMAND_TABLE, {
        command_id: commandId,
        session_id: input.session_id,
        event_id: input.event_id ?? `${input.origin}:${commandId}`,
        origin: input.origin,
        instruction: input.instruction,
        images: input.images,
        image_count: facts.count,
        image_bytes: facts.bytes,
        image_digest: facts.digest,
        request_key: input.request_key,
        request_digest: digest,
        state: "pending",
        lease_token: null,
        lease_runtime_id: null,
        lease_expires_at: null,
        first_claimed_at: null,
        deliveries: 0,
        created_at: now,
        updated_at: now,
      });
      await this.#changed(record, record.origin === "operator" ? "operator" : "persona", { instruction: record.instruction, request_key: record.request_key });
      return { record, duplicate: false };
    });
    this.#creations = run.catch(() => {});
    return run;
  }

  /**
   * Leases the session's next command for this runtime, or answers `{command: null}`. If
   * `clientGone` has aborted by the time the lease is granted, the answer could never be written:
   * the claim is rolled back and `{command: null}` answered.
   */
  async claim(sessionId: string, runtimeId: string, withImages: boolean, clientGone?: AbortSignal): Promise<ClaimAnswer> {
    const db = this.#ctx.database;
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      if (clientGone?.aborted) return { command: null };
      const now = new Date();
      // Picking needs no image bytes; only the leased command's are read, once it is ours.
      const active = await db.get(COMMAND_TABLE, where({ session_id: sessionId, state: ACTIVE_STATES }), { fields: WITHOUT_IMAGES, sort: { seq: "asc" } });
      const picked = pickClaim(active.map((row) => ({ ...row, images: [] })), now, { runtimeId, supportsImages: withImages });
      if (!picked) return { command: null };
      const token = randomBytes(24).toString("base64url");
      const patch = claimPatch(picked, { token, runtimeId, now, leaseMs: this.#options.leaseMs });
      const { matched } = await db.set(COMMAND_TABLE, where(guardOf(picked)), patch);
      if (matched === 1) {
        const leased = { ...picked, ...patch };
        await this.#changed(leased, "agent", { runtime_id: runtimeId, lease_expires_at: patch.lease_expires_at, deliveries: patch.deliveries });
        const images = picked.image_count > 0 ? ((await db.get(COMMAND_TABLE, { seq: picked.seq }, ["images"]))[0]?.images ?? []) : [];
        // Checked after the last await: from here to the answer's write no I/O event (a close) is handled.
        if (clientGone?.aborted) {
          await this.#rollBack(leased, picked, runtimeId);
          return { command: null };
        }
        return { command: claimedCommand({ ...picked, images }), lease: { token, expires_at: patch.lease_expires_at!.toISOString() } };
      }
    }
    // Lost every race for this session's head: nothing leased, the client simply claims again.
    return { command: null };
  }

  /**
   * Puts a leased command back exactly as it was before `leased`'s claim, conditionally on that
   * lease still being the current one; otherwise (a very short lease already expired) it has moved on.
   */
  async #rollBack(leased: CommandRecord, before: CommandRecord, runtimeId: string): Promise<void> {
    const patch = rollbackPatch(before, new Date());
    const { matched } = await this.#ctx.database.set(COMMAND_TABLE, where(guardOf(leased)), patch);
    if (matched === 1) await this.#changed({ ...before, ...patch }, "server", { claim_rolled_back: "client_gone", runtime_id: runtimeId });
  }

  async ack(commandId: string, ack: AckInput): Promise<void> {
    await this.#transition(commandId, (record, now) => decideAck(record, ack, now), "agent");
  }

  async cancel(sessionId: string, commandId: string): Promise<CommandSummary> {
    return summarize(await this.#transition(commandId, (record, now) => decideCancel(record, sessionId, now)));
  }

  /** Newest first, without image bytes or lease tokens. */
  async list(sessionId: string, limit: number): Promise<CommandSummary[]> {
    const rows = await this.#ctx.database.get(COMMAND_TABLE, { session_id: sessionId }, { fields: WITHOUT_IMAGES, sort: { seq: "desc" }, limit });
    return rows.map((row) => summarize({ ...row, images: [] }));
  }

  /** Decoded image bytes held by pending and leased commands: what the budget counts. */
  async activeImageBytes(): Promise<number> {
    const sum = await this.#ctx.database.eval(COMMAND_TABLE, (row) => koishi.$.sum(row.image_bytes), where({ state: ACTIVE_STATES }));
    return Number(sum ?? 0);
  }

  /** Puts expired leases back to pending and wakes their sessions' long polls. */
  async expireLeases(): Promise<void> {
    const now = new Date();
    const db = this.#ctx.database;
    const expired = await db.get(COMMAND_TABLE, { state: "leased", lease_expires_at: { $lte: now } }, { fields: WITHOUT_IMAGES });
    for (const row of expired) {
      const record = { ...row, images: [] };
      const patch = expiryPatch(record, now);
      if (!patch) continue;
      const { matched } = await db.set(COMMAND_TABLE, where(guardOf(record)), patch);
      if (matched !== 1) continue;
      await this.#changed({ ...record, ...patch }, "server", { lease_expired: true });
    }
  }

  /**
   * After every committed state change: wake the session's long polls, since any change may have
   * made a command claimable (a creation, an ACK freeing the head, an expiry), and write one audit
   * row, whose actor defaults to whoever the request came from.
   */
  async #changed(record: CommandRecord, actor: AuditActor | undefined, data: Record<string, unknown>): Promise<void> {
    this.notifier.notify(record.session_id);
    await this.#options.audit?.record({
      ...(actor ? { actor } : {}),
      action: `command.${record.state}`,
      session_id: record.session_id,
      subject: record.command_id,
      data: { event_id: record.event_id, origin: record.origin, image_count: record.image_count, image_bytes: record.image_bytes, image_digest: record.image_digest, ...data },
    });
  }

  async #transition(commandId: string, decide: (record: CommandRecord | undefined, now: Date) => Transition, actor?: AuditActor): Promise<CommandRecord> {
    const db = this.#ctx.database;
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      const [record] = await db.get(COMMAND_TABLE, { command_id: commandId });
      const decision = decide(record, new Date());
      if (decision.kind === "refuse") throw new HttpError(decision.status, decision.error);
      if (!record || decision.kind === "unchanged") return record!;
      const { matched } = await db.set(COMMAND_TABLE, where(guardOf(record)), decision.patch);
      if (matched !== 1) continue;
      const changed = { ...record, ...decision.patch };
      await this.#changed(changed, actor, {});
      return changed;
    }
    throw new HttpError(503, "not_ready", { retryAfterSeconds: 1 });
  }
}

export interface CommandRoutesDeps {
  api: HttpApi;
  registry: SessionRegistry;
  commands: CommandStore;
  leaseMs: number;
}

/** The agent's side of the queue: claim (with long poll) and ACK, plus the lease-expiry sweep. */
export const CommandRoutes = {
  name: "notify-webhook-commands",
  reusable: true,
  apply(ctx: Context, { api, registry, commands, leaseMs }: CommandRoutesDeps) {
    const { notifier } = commands;
    ctx.on("dispose", () => notifier.close());
    for (const capability of ["commands", "command_images", "long_poll"]) api.offer(ctx, capability);
    const logger = ctx.logger("notify-webhook");
    ctx.setInterval(() => {
      commands.expireLeases().catch((error: unknown) => logger.warn("lease sweep failed: %s", error instanceof Error ? error.message : String(error)));
    }, Math.min(LEASE_SWEEP_MAX_MS, Math.max(100, Math.floor(leaseMs / 2))));

    api.route(ctx, { method: "GET", path: "/commands", auth: "agent" }, async (request) => {
      const query = parseWith(ClaimQuery, Object.fromEntries(request.query));
      const withImages = (query.capabilities ?? "").split(",").map((c) => c.trim()).includes("images");
      const deadline = Date.now() + query.wait_ms;
      for (;;) {
        const entry = registry.find(query.session_id);
        if (!entry || entry.heartbeat.runtime_id !== query.runtime_id) throw new HttpError(409, "session_offline");
        const watch = notifier.watch(query.session_id);
        try {
          const answer = await commands.claim(query.session_id, query.runtime_id, withImages && supportsImages(entry.heartbeat), request.signal);
          const remaining = deadline - Date.now();
          if (answer.command || remaining <= 0 || notifier.closed || request.signal.aborted) return json(200, answer);
          await wake(ctx, watch.fired, remaining, request.signal);
          if (notifier.closed || request.signal.aborted) return json(200, { command: null });
        } finally {
          watch.close();
        }
      }
    });

    api.route(ctx, { method: "POST", path: "/commands/:command_id/ack", auth: "agent" }, async (request) => {
      const body = parseWith(AckBody, request.body);
      await commands.ack(request.params.command_id ?? "", body);
      return json(200, { state: "accepted" });
    });
  },
};

/** Waits for a wake-up, the time left, or the client leaving, and leaves no timer or listener behind. */
function wake(ctx: Context, fired: Promise<void>, ms: number, signal: AbortSignal): Promise<void> {
  return new Promise<void>((resolve) => {
    const done = () => {
      stopTimer();
      signal.removeEventListener("abort", done);
      resolve();
    };
    const stopTimer = ctx.setTimeout(done, ms);
    signal.addEventListener("abort", done, { once: true });
    void fired.then(done);
  });
}
