/** The command queue's state changes, each a conditional write on its guard, taking turns per session in
 * the process (minato's `set` is not atomic on SQLite). Final commands stay as tombstones. */
import { randomBytes } from "node:crypto";
import type { Context } from "koishi";
import type { AuditActor } from "../../protocol/audit.ts";
import { CONTROL_PAYLOADS, laneOf, type ClaimAnswer, type CommandLane, type CommandSummary, type ControlKind } from "../../protocol/queue.ts";
import {
  ACTIVE_STATES,
  ackAuditData,
  checkImages,
  claimedCommand,
  claimPatch,
  decideAck,
  decideCancel,
  decideCreate,
  expiryPatch,
  guardOf,
  pickClaim,
  reboundFrom,
  requestDigest,
  rollbackPatch,
  stopExpiryPatch,
  summarize,
  type AckInput,
  type CommandPatch,
  type CommandRecord,
  type Transition,
} from "./decisions.ts";
import type { AuditLog } from "../audit/store.ts";
import { wireIssues } from "../../protocol/wire.ts";
import { StartPayload } from "../../protocol/hosts.ts";
import { DomainError } from "../../common/domain-error.ts";
import { Turns } from "../../common/turns.ts";
import { COMMAND_TABLE, CommandTable, FINAL_STATES, WITHOUT_IMAGES, where, withoutImages, type NewRow } from "./table.ts";
import { LongPollWaker } from "./waker.ts";

/** Conditional writes that lost a race are decided again on a fresh read, a bounded number of times. */
const MAX_RACE_RETRIES = 5;

/** `event_id`: the notice this answers, null for a proactive or operator message; `request_key`: namespaced by the caller (persona tool call or
 * operator key), null for no idempotency. */
export type NewCommand = Pick<NewRow, "session_id" | "event_id" | "origin" | "instruction" | "images" | "request_key">;

export interface CommandStoreOptions {
  leaseMs: number;
  imageBudgetBytes: number;
  /** How long a stop may wait to be handed out before the server cancels it (`expired`). */
  stopTtlMs: number;
  /** Receives every state change (never a lease token or image bytes). */
  audit?: AuditLog | undefined;
  now?: (() => Date) | undefined;
}

const CREATE = "create";
/** A control command or start job: no notice, instruction, images or request key. */
const NO_CONTENT = { event_id: null, instruction: "", image_count: 0, image_bytes: 0, image_digest: null, request_key: null };

export class CommandStore extends CommandTable {
  readonly waker = new LongPollWaker();
  readonly #ctx: Context;
  readonly #options: CommandStoreOptions;
  readonly #now: () => Date;
  /** One turn for all creations (key `CREATE`): the budget and request-key checks hold until the insert lands. */
  readonly #creations = new Turns();
  /** Keyed by session id: every state change of a session's commands runs in its turn. */
  readonly #turns = new Turns();

  constructor(ctx: Context, options: CommandStoreOptions) {
    super(ctx);
    this.#ctx = ctx;
    this.#options = options;
    this.#now = options.now ?? (() => new Date());
  }

  /** Validates the images and queues the command, or returns the stored one for a repeated request key; `admit` runs only for a new command, before the
   * budget check, and refuses by throwing. */
  create(input: NewCommand, admit: () => Promise<void> = async () => {}): Promise<{ record: CommandRecord; duplicate: boolean }> {
    const check = checkImages(input.images);
    if (!check.ok) return Promise.reject(new DomainError("invalid_image", { issues: check.issues }));
    const { facts } = check;
    return this.#creations.run(CREATE, async () => {
      const db = this.#ctx.database;
      const sameKey = input.request_key ? (await db.get(COMMAND_TABLE, { request_key: input.request_key }))[0] : undefined;
      if (!sameKey) await admit();
      const digest = requestDigest({ ...input, image_digest: facts.digest });
      const activeBytes = facts.bytes > 0 && !sameKey ? await this.activeImageBytes() : 0;
      const decision = decideCreate(sameKey, digest, activeBytes, facts.bytes, this.#options.imageBudgetBytes);
      if (decision.kind === "refuse") throw new DomainError(decision.error);
      if (decision.kind === "reuse") return { record: decision.record, duplicate: true };
      const image = { image_count: facts.count, image_bytes: facts.bytes, image_digest: facts.digest };
      // Named, not spread: a caller's extra field never reaches the table.
      const { session_id, event_id, origin, instruction, images, request_key } = input;
      const record = await this.insert(
        { session_id, event_id, origin, instruction, images, request_key, kind: "instruction", payload: null, ...image, request_digest: digest },
        this.#now(),
      );
      // An operator-origin command is recorded as whoever asked (the operator API, the chat, the console page).
      await this.#changed(record, record.origin === "operator" ? undefined : "persona", { instruction: record.instruction, request_key: record.request_key });
      return { record, duplicate: false };
    });
  }

  /** Queues a control command (protocol 3) with its kind's payload; whether the session can take it is the caller's to decide first. */
  createControlCommand<K extends ControlKind>(sessionId: string, kind: K, payload: unknown, actor: AuditActor): Promise<CommandSummary> {
    const parsed = CONTROL_PAYLOADS[kind].safeParse(payload);
    if (!parsed.success) return Promise.reject(new DomainError("invalid_request", { issues: wireIssues(parsed.error) }));
    return this.#createWithPayload(sessionId, kind, parsed.data, actor);
  }

  /** Queues a start job on a host's lane (docs/protocol.md, Hosts); `hostId` takes the session id's place. */
  createStartJob(hostId: string, payload: StartPayload, actor: AuditActor): Promise<CommandSummary> {
    return this.#createWithPayload(hostId, "start", StartPayload.parse(payload), actor);
  }

  /** A command's payload as stored (a start's refusal included); undefined for an unknown id. */
  async payloadOf(commandId: string): Promise<Record<string, unknown> | null | undefined> {
    const [row] = await this.#ctx.database.get(COMMAND_TABLE, { command_id: commandId }, ["payload"]);
    return row?.payload;
  }

  #createWithPayload(sessionId: string, kind: ControlKind | "start", checked: Record<string, unknown>, actor: AuditActor): Promise<CommandSummary> {
    return this.#creations.run(CREATE, async () => {
      const digest = requestDigest({ session_id: sessionId, event_id: null, instruction: "", image_digest: null, control: { kind, payload: checked } });
      const fields = { session_id: sessionId, origin: "operator" as const, kind, payload: checked, request_digest: digest };
      const record = await this.insert({ ...NO_CONTENT, images: [], ...fields }, this.#now());
      await this.#changed(record, actor, { payload: checked });
      return summarize(record);
    });
  }

  /** Resolves with the command's summary once it is final, or with its current one when `timeoutMs` is up or the plugin stops. */
  async waitFinal(commandId: string, timeoutMs: number): Promise<CommandSummary> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const first = await this.summary(commandId);
      if (!first) throw new DomainError("not_found");
      // Watched before the second look, so a change between the look and the wait still wakes it.
      const watch = this.waker.watch(first.session_id, laneOf(first.kind));
      try {
        const current = (await this.summary(commandId)) ?? first;
        const left = deadline - Date.now();
        if (FINAL_STATES.has(current.state) || left <= 0 || this.waker.closed) return current;
        await watch.until(left);
      } finally {
        watch.close();
      }
    }
  }

  /** Leases the session's next command for this runtime, or answers `{command: null}`; if `clientGone` aborted before the lease, the claim is rolled
   * back. */
  claim(sessionId: string, runtimeId: string, withImages: boolean, clientGone?: AbortSignal, lane: CommandLane = "instructions"): Promise<ClaimAnswer> {
    return this.#turns.run(sessionId, async () => {
      const db = this.#ctx.database;
      for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
        if (clientGone?.aborted) return { command: null };
        const now = this.#now();
        // Picking needs no image bytes; only the leased command's are read, once it is ours.
        const active = await db.get(COMMAND_TABLE, where({ session_id: sessionId, state: ACTIVE_STATES }), { fields: WITHOUT_IMAGES, sort: { seq: "asc" } });
        const claimer = { runtimeId, supportsImages: withImages, lane, stopTtlMs: this.#options.stopTtlMs };
        const picked = pickClaim(withoutImages(active), now, claimer);
        if (!picked) return { command: null };
        const token = randomBytes(24).toString("base64url");
        const patch = claimPatch(picked, { token, runtimeId, now, leaseMs: this.#options.leaseMs });
        const { matched } = await db.set(COMMAND_TABLE, where(guardOf(picked)), patch);
        if (matched === 1) {
          const leased = { ...picked, ...patch };
          await this.#changed(leased, "agent", { runtime_id: runtimeId, lease_expires_at: patch.lease_expires_at, deliveries: patch.deliveries });
          const from = reboundFrom(picked, runtimeId);
          // Delivered (maybe) to one runtime, now handed to another: the owner sees it on the trail.
          if (from)
            await this.#options.audit?.record({
              actor: "server",
              action: "command.rebound",
              session_id: sessionId,
              subject: picked.command_id,
              data: { from_runtime_id: from, to_runtime_id: runtimeId, kind: picked.kind },
            });
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
    });
  }

  /** Puts a leased command back as it was before the claim, if that lease is still current; otherwise it has moved on. */
  async #rollBack(leased: CommandRecord, before: CommandRecord, runtimeId: string): Promise<void> {
    const patch = rollbackPatch(before, this.#now());
    const { matched } = await this.#ctx.database.set(COMMAND_TABLE, where(guardOf(leased)), patch);
    if (matched === 1) await this.#changed({ ...before, ...patch }, "server", { claim_rolled_back: "client_gone", runtime_id: runtimeId });
  }

  /** In the turn of the session the ACK names: one naming another session is refused without a write. */
  async ack(commandId: string, ack: AckInput): Promise<void> {
    await this.#turns.run(ack.session_id, () => this.#transition(commandId, (record, now) => decideAck(record, ack, now), "agent", ackAuditData(ack)));
  }

  async cancel(sessionId: string, commandId: string): Promise<CommandSummary> {
    const decide = (record: CommandRecord | undefined, now: Date) => decideCancel(record, sessionId, now);
    return summarize(await this.#turns.run(sessionId, () => this.#transition(commandId, decide, undefined, { cancel_reason: "operator" })));
  }

  /** Expired leases back to pending, then stops that waited too long cancelled. */
  async sweep(): Promise<void> {
    await this.expireLeases();
    const now = this.#now();
    const bornBefore = new Date(now.getTime() - this.#options.stopTtlMs);
    const query = { kind: "stop", state: "pending", created_at: { $lte: bornBefore } } as const;
    const waiting = await this.#ctx.database.get(COMMAND_TABLE, query, { fields: WITHOUT_IMAGES });
    await this.#expire(waiting, (record) => stopExpiryPatch(record, now, this.#options.stopTtlMs), { cancel_reason: "expired" });
  }

  async expireLeases(): Promise<void> {
    const now = this.#now();
    const expired = await this.#ctx.database.get(COMMAND_TABLE, { state: "leased", lease_expires_at: { $lte: now } }, { fields: WITHOUT_IMAGES });
    await this.#expire(expired, (record) => expiryPatch(record, now), { lease_expired: true });
  }

  /** Writes each row's expiry patch (if it has one) on its guard, in its session's turn. */
  async #expire(rows: Omit<CommandRecord, "images">[], patchOf: (record: CommandRecord) => CommandPatch | null, data: Record<string, unknown>) {
    for (const record of withoutImages(rows)) {
      const patch = patchOf(record);
      if (!patch) continue;
      await this.#turns.run(record.session_id, async () => {
        const { matched } = await this.#ctx.database.set(COMMAND_TABLE, where(guardOf(record)), patch);
        if (matched === 1) await this.#changed({ ...record, ...patch }, "server", data);
      });
    }
  }

  /** After every committed change: wake the session's long polls (any change may make a command claimable) and write one audit row, its actor by default
   * whoever the request came from. */
  async #changed(record: CommandRecord, actor: AuditActor | undefined, data: Record<string, unknown>): Promise<void> {
    this.waker.wake(record.session_id, laneOf(record.kind));
    const { event_id, origin, kind, image_count, image_bytes, image_digest } = record;
    await this.#options.audit?.record({
      ...(actor ? { actor } : {}),
      action: `command.${record.state}`,
      session_id: record.session_id,
      subject: record.command_id,
      data: { event_id, origin, kind, image_count, image_bytes, image_digest, ...data },
    });
  }

  async #transition(
    commandId: string,
    decide: (record: CommandRecord | undefined, now: Date) => Transition,
    actor?: AuditActor,
    data: Record<string, unknown> = {},
  ): Promise<CommandRecord> {
    const db = this.#ctx.database;
    for (let attempt = 0; attempt < MAX_RACE_RETRIES; attempt++) {
      const [record] = await db.get(COMMAND_TABLE, { command_id: commandId });
      const decision = decide(record, this.#now());
      if (decision.kind === "refuse") throw new DomainError(decision.error);
      if (!record || decision.kind === "unchanged") return record!;
      const { matched } = await db.set(COMMAND_TABLE, where(guardOf(record)), decision.patch);
      if (matched !== 1) continue;
      const changed = { ...record, ...decision.patch };
      await this.#changed(changed, actor, data);
      return changed;
    }
    throw new DomainError("not_ready", { retryAfterSeconds: 1 });
  }
}
