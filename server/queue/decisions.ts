/** What a claim, lease expiry, ACK, cancel or create does to one command; the store writes the patch only if
 * the guard it was decided on still matches. */
import { createHash } from "node:crypto";
import type { z } from "zod";
import { imageSize } from "image-size";
import { wholeImageProblem } from "./image-rules.ts";
import { redactSecrets } from "../../common/redact.ts";
import {
  type AckBody,
  laneOf,
  OUTCOMES,
  type ClaimedCommand,
  type CommandImage,
  type CommandKind,
  type CommandLane,
  type CommandOutcome,
  type CommandState,
  type CommandSummary,
  type ImageMime,
  type StartRefusal,
  type StoppedRun,
} from "../../protocol/queue.ts";
import type { SessionRunState } from "../../protocol/sessions.ts";
import { LIMITS, type ErrorCode } from "../../protocol/wire.ts";

/** One row of `anon_notify_command`: `payload` is a control command's (checked against its kind's schema at creation), null for instructions;
 * `images` are emptied when the command reaches a final state; the newest lease is kept after expiry and ACK so a late or repeated ACK can be
 * recognised; `first_claimed_at`, set by the first claim, is the cut-off for cancelling (cleared only when that claim is rolled back). */
export type CommandRecord = Pick<CommandSummary, "command_id" | "event_id" | "session_id" | "origin" | "kind" | "state" | "outcome" | "cancel_reason"> & {
  seq: number;
  payload: Record<string, unknown> | null;
  instruction: string;
  images: CommandImage[];
  image_count: number;
  image_bytes: number;
  image_digest: string | null;
  request_key: string | null;
  request_digest: string;
  lease_token: string | null;
  lease_runtime_id: string | null;
  lease_expires_at: Date | null;
  first_claimed_at: Date | null;
  deliveries: number;
  created_at: Date;
  updated_at: Date;
};

export type CommandPatch = Partial<Omit<CommandRecord, "seq" | "command_id">>;

type Refusal = { kind: "refuse"; error: ErrorCode };

export const ACTIVE_STATES: CommandState[] = ["pending", "leased"];

/** What a conditional write must still find, so that a concurrent change voids the decision. */
export function guardOf(record: CommandRecord): Pick<CommandRecord, "seq" | "state" | "lease_token"> {
  return { seq: record.seq, state: record.state, lease_token: record.lease_token };
}

export function isCancellable(record: CommandRecord): boolean {
  return record.state === "pending" && record.first_claimed_at === null;
}

function leaseExpired(record: CommandRecord, now: Date): boolean {
  return record.state === "leased" && record.lease_expires_at !== null && record.lease_expires_at <= now;
}

export type Claimer = { runtimeId: string; supportsImages: boolean; lane: CommandLane; stopTtlMs: number };

/** The runtime that held `record`'s last lease when `runtimeId` now claims it, or null when it is the same or none. */
export function reboundFrom(record: CommandRecord, runtimeId: string): string | null {
  return record.first_claimed_at !== null && record.lease_runtime_id !== null && record.lease_runtime_id !== runtimeId ? record.lease_runtime_id : null;
}

/** A stop older than its time to live must never stop a later run: it is not handed out again. */
function isStaleStop(record: CommandRecord, now: Date, stopTtlMs: number): boolean {
  return record.kind === "stop" && record.created_at.getTime() + stopTtlMs <= now.getTime();
}

/** The command a claim should lease. Each lane is its own queue; a client without the image capability never gets an image command (the others still go);
 * an unexpired lease holds the lane whichever runtime holds it, so commands arrive in order (a gone runtime's lease must run out first). */
export function pickClaim(active: readonly CommandRecord[], now: Date, claimer: Claimer): CommandRecord | null {
  for (const record of active) {
    if (laneOf(record.kind) !== claimer.lane || isStaleStop(record, now, claimer.stopTtlMs)) continue;
    if (record.image_count > 0 && !claimer.supportsImages) continue;
    if (record.state === "pending") return record;
    if (record.state !== "leased") continue;
    if (leaseExpired(record, now)) return record;
    return null;
  }
  return null;
}

/** Whether an empty claim may be held open: an instruction claim only while idle (the heartbeat a run starts with ends it, and the client reads that
 * answer, so nothing leased then is lost); a control claim always, so a stop reaches a run mid-tool, and a host's (it has no run state). */
export function mayHoldClaim(lane: CommandLane, state: SessionRunState | undefined): boolean {
  return lane !== "instructions" || state === "idle";
}

export type PollCaps = { perSession: number; total: number };

/** Whether one more long poll may be held, given how many are held now; the surplus is answered at once. */
export function mayHoldPoll(heldBySession: number, heldTotal: number, caps: PollCaps): boolean {
  return heldBySession < caps.perSession && heldTotal < caps.total;
}

export function claimPatch(record: CommandRecord, grant: { token: string; runtimeId: string; now: Date; leaseMs: number }): CommandPatch {
  return {
    state: "leased",
    lease_token: grant.token,
    lease_runtime_id: grant.runtimeId,
    lease_expires_at: new Date(grant.now.getTime() + grant.leaseMs),
    first_claimed_at: record.first_claimed_at ?? grant.now,
    deliveries: record.deliveries + 1,
    updated_at: grant.now,
  };
}

/** Undoes a claim whose answer never left the server: every field the claim set goes back, as if it had never happened. */
export function rollbackPatch(before: CommandRecord, now: Date): CommandPatch {
  const { state, lease_token, lease_runtime_id, lease_expires_at, first_claimed_at, deliveries } = before;
  return { state, lease_token, lease_runtime_id, lease_expires_at, first_claimed_at, deliveries, updated_at: now };
}

/** An expired lease goes back to pending. `first_claimed_at` stays (the content may be inside Pi: never cancellable again), and so does the lease token,
 * so a late ACK is still accepted. */
export function expiryPatch(record: CommandRecord, now: Date): CommandPatch | null {
  if (!leaseExpired(record, now)) return null;
  return { state: "pending", lease_expires_at: null, updated_at: now };
}

/** A stop still waiting when its time to live is up is cancelled, so it never stops a later run. */
export function stopExpiryPatch(record: CommandRecord, now: Date, stopTtlMs: number): CommandPatch | null {
  if (record.state !== "pending" || !isStaleStop(record, now, stopTtlMs)) return null;
  return { ...finalPatch("cancelled", now), cancel_reason: "expired" };
}

function finalPatch(state: "accepted" | "cancelled", now: Date): CommandPatch {
  // Final commands keep count, bytes and digest of their images, never the bytes themselves.
  return { state, images: [], lease_expires_at: null, updated_at: now };
}

export type AckInput = z.infer<typeof AckBody>;

/** A control command's ACK must say what happened, from its kind's outcomes; an instruction's says nothing; only a stop that stopped a run names it. */
export function outcomeAllowed(kind: CommandKind, outcome: CommandOutcome | undefined, run?: StoppedRun, refusal?: StartRefusal): boolean {
  if (run !== undefined && !(kind === "stop" && outcome === "stopped")) return false;
  // A start's `refused` must say why; nothing else carries a refusal.
  if ((refusal !== undefined) !== (kind === "start" && outcome === "refused")) return false;
  if (kind === "instruction") return outcome === undefined;
  return outcome !== undefined && OUTCOMES[kind].includes(outcome);
}

/** What an ACK leaves on the audit row: the outcome, and a stopped run with its task's secrets masked again (the server shows it). */
export function ackAuditData(ack: AckInput): Record<string, unknown> {
  return {
    ...(ack.outcome ? { outcome: ack.outcome } : {}),
    ...(ack.refusal ? { refusal: ack.refusal } : {}),
    ...(ack.run ? { run: { ...ack.run, task: redactSecrets(ack.run.task) } } : {}),
  };
}

export type Transition = { kind: "write"; patch: CommandPatch } | { kind: "unchanged" } | Refusal;

export function decideAck(record: CommandRecord | undefined, ack: AckInput, now: Date): Transition {
  if (!record || record.session_id !== ack.session_id) return { kind: "refuse", error: "not_found" };
  if (record.lease_token !== ack.lease_token || record.lease_runtime_id !== ack.runtime_id) {
    return { kind: "refuse", error: "lease_mismatch" };
  }
  if (!outcomeAllowed(record.kind, ack.outcome, ack.run, ack.refusal)) return { kind: "refuse", error: "invalid_request" };
  // A repeat is answered alike; the first outcome stays.
  if (record.state === "accepted") return { kind: "unchanged" };
  // `pending` here means the lease expired but nobody claimed it since: the client did deliver it.
  if (record.state === "leased" || record.state === "pending") {
    // A start's refusal stays on its payload, where the start service reads it.
    const payload = ack.refusal ? { payload: { ...record.payload, refusal: ack.refusal } } : {};
    return { kind: "write", patch: { ...finalPatch("accepted", now), outcome: ack.outcome ?? null, ...payload } };
  }
  return { kind: "refuse", error: "lease_mismatch" };
}

export function decideCancel(record: CommandRecord | undefined, sessionId: string, now: Date): Transition {
  if (!record || record.session_id !== sessionId) return { kind: "refuse", error: "not_found" };
  if (record.state === "cancelled") return { kind: "unchanged" };
  if (record.state === "accepted") return { kind: "refuse", error: "already_accepted" };
  if (!isCancellable(record)) return { kind: "refuse", error: "delivery_started" };
  return { kind: "write", patch: { ...finalPatch("cancelled", now), cancel_reason: "operator" } };
}

/** A repeated request key returns the stored command, final ones included (a cancelled command never comes back); the same key over other content is
 * refused. */
export function decideCreate(
  sameKey: CommandRecord | undefined,
  requestDigest: string,
  activeImageBytes: number,
  newImageBytes: number,
  imageBudgetBytes: number,
): { kind: "reuse"; record: CommandRecord } | { kind: "insert" } | Refusal {
  if (sameKey) {
    return sameKey.request_digest === requestDigest ? { kind: "reuse", record: sameKey } : { kind: "refuse", error: "idempotency_key_reused" };
  }
  if (newImageBytes > 0 && activeImageBytes + newImageBytes > imageBudgetBytes) {
    return { kind: "refuse", error: "image_budget_exceeded" };
  }
  return { kind: "insert" };
}

/** `control`: control commands only; an instruction's digest is what it was before there were kinds. */
export function requestDigest(content: {
  session_id: string;
  event_id: string | null;
  instruction: string;
  image_digest: string | null;
  control?: { kind: CommandKind; payload: Record<string, unknown> } | undefined;
}): string {
  const control = content.control ? [content.control.kind, content.control.payload] : [];
  const canonical = JSON.stringify([content.session_id, content.event_id, content.instruction, content.image_digest, ...control]);
  return createHash("sha256").update(canonical).digest("hex");
}

function preview(text: string): string {
  const chars = Array.from(text);
  return chars.length <= LIMITS.previewChars ? text : `${chars.slice(0, LIMITS.previewChars - 1).join("")}…`;
}

/** The listing shape: no image bytes, no lease token, nothing of other sessions. */
export function summarize(record: CommandRecord): CommandSummary {
  return {
    command_id: record.command_id,
    event_id: record.event_id,
    session_id: record.session_id,
    origin: record.origin,
    kind: record.kind,
    state: record.state,
    outcome: record.outcome,
    cancel_reason: record.cancel_reason,
    cancellable: isCancellable(record),
    preview: preview(record.instruction),
    image_count: record.image_count,
    created_at: record.created_at.toISOString(),
    updated_at: record.updated_at.toISOString(),
  };
}

export function claimedCommand(record: CommandRecord): ClaimedCommand {
  return {
    command_id: record.command_id,
    event_id: record.event_id,
    origin: record.origin,
    kind: record.kind,
    instruction: record.instruction,
    images: record.images,
    ...(record.kind === "instruction" ? {} : { payload: record.payload ?? {} }),
    created_at: record.created_at.toISOString(),
  };
}

/** What a model provider takes: each side at most this many pixels, and at most this many in all. */
const IMAGE_BOUNDS = { maxSide: 16_384, maxPixels: 40_000_000 } as const;

const DECODED_TYPES: Readonly<Record<string, ImageMime>> = { png: "image/png", jpg: "image/jpeg", gif: "image/gif", webp: "image/webp" };

/** Reads the header with image-size (type, and dimensions within `IMAGE_BOUNDS`), then decodes the whole image (image-rules.ts): magic bytes alone are
 * not an image. */
export function decodeImage(bytes: Buffer): { ok: true; mime: ImageMime; width: number; height: number } | { ok: false; problem: string } {
  let size: ReturnType<typeof imageSize>;
  try {
    // A copy with its own buffer: image-size reads past a short input's end, and a decoded base64
    // Buffer shares Node's pool, so those reads would see other data instead of failing.
    size = imageSize(Uint8Array.from(bytes));
  } catch {
    return { ok: false, problem: "content is not a PNG, JPEG, GIF or WebP image" };
  }
  const mime = size.type ? DECODED_TYPES[size.type] : undefined;
  if (!mime) return { ok: false, problem: "content is not a PNG, JPEG, GIF or WebP image" };
  const { width, height } = size;
  const sane = (side: number) => Number.isInteger(side) && side >= 1 && side <= IMAGE_BOUNDS.maxSide;
  if (!sane(width) || !sane(height) || width * height > IMAGE_BOUNDS.maxPixels) {
    return {
      ok: false,
      problem: `${mime} header gives dimensions ${width}×${height}; each side must be 1–${IMAGE_BOUNDS.maxSide}, at most ${IMAGE_BOUNDS.maxPixels} pixels`,
    };
  }
  const whole = wholeImageProblem(mime, bytes, IMAGE_BOUNDS.maxPixels);
  if (whole) return { ok: false, problem: whole };
  return { ok: true, mime, width, height };
}

/** Decoded sizes and each image's header (the schema checked count, alphabet and type names); the digest covers types and bytes, in order. */
export function checkImages(images: readonly CommandImage[]) {
  const issues: { path: string; message: string }[] = [];
  const hash = createHash("sha256");
  let total = 0;
  images.forEach((image, index) => {
    const bytes = Buffer.from(image.data, "base64");
    total += bytes.length;
    hash.update(`${image.mime_type}\0${bytes.length}\0`).update(bytes);
    if (bytes.length > LIMITS.imageBytes) {
      issues.push({ path: `images.${index}.data`, message: `decodes to ${bytes.length} bytes; at most ${LIMITS.imageBytes}` });
    }
    const decoded = decodeImage(bytes);
    if (!decoded.ok) issues.push({ path: `images.${index}.data`, message: decoded.problem });
    else if (decoded.mime !== image.mime_type)
      issues.push({ path: `images.${index}.data`, message: `content is ${decoded.mime}, declared ${image.mime_type}` });
  });
  if (total > LIMITS.commandImageBytes) {
    issues.push({ path: "images", message: `images decode to ${total} bytes together; at most ${LIMITS.commandImageBytes}` });
  }
  if (issues.length > 0) return { ok: false, issues } as const;
  return { ok: true, facts: { count: images.length, bytes: total, digest: images.length > 0 ? hash.digest("hex") : null } } as const;
}
