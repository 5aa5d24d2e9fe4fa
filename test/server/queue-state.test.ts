/** The command queue's pure decisions (server/queue/decisions.ts): claims, holds, expiries, ACK outcomes, cancels, creates, image checks. */
import { test } from "node:test";
import assert from "node:assert/strict";
import type { CommandImage } from "../../protocol/queue.ts";
import { LIMITS } from "../../protocol/wire.ts";
import {
  checkImages,
  claimPatch,
  decideAck,
  decideCancel,
  decideCreate,
  expiryPatch,
  isCancellable,
  mayHoldClaim,
  outcomeAllowed,
  ackAuditData,
  pickClaim,
  requestDigest,
  rollbackPatch,
  stopExpiryPatch,
  summarize,
  type Claimer,
  type CommandRecord,
} from "../../server/queue/decisions.ts";
import { pendingRow } from "../../server/queue/table.ts";
import { imageHeader, imageOf } from "./images.ts";

const T0 = new Date("2026-11-30T03:00:00.000Z");
const at = (ms: number) => new Date(T0.getTime() + ms);

function record(overrides: Partial<CommandRecord> = {}): CommandRecord {
  const fields = {
    command_id: "c-1",
    session_id: "s-1",
    event_id: "e-1",
    origin: "anon",
    kind: "instruction",
    payload: null,
    instruction: "run the tests",
    images: [],
    image_count: 0,
    image_bytes: 0,
    image_digest: null,
    request_key: null,
    request_digest: "d",
  } as const;
  return { seq: 1, ...pendingRow({ ...fields, images: [] }, T0), ...overrides };
}

const leased = (expiresInMs: number) =>
  record({ state: "leased", lease_token: "L1", lease_runtime_id: "r-1", lease_expires_at: at(expiresInMs), first_claimed_at: T0, deliveries: 1 });

test("pickClaim follows queue order, lease ownership and the image capability", () => {
  const me = { runtimeId: "r-1", supportsImages: false, lane: "instructions" as const, stopTtlMs: 30_000 };
  const withImages = { ...me, supportsImages: true };
  const p = (seq: number, overrides: Partial<CommandRecord> = {}) => record({ seq, command_id: `c-${seq}`, ...overrides });
  const lease = (seq: number, runtime: string, expiresInMs: number) =>
    p(seq, { state: "leased", lease_token: `L${seq}`, lease_runtime_id: runtime, lease_expires_at: at(expiresInMs), first_claimed_at: T0 });
  const image = { image_count: 1, image_bytes: 10 };
  const cases: [string, CommandRecord[], typeof me, number | null][] = [
    ["empty queue", [], me, null],
    ["oldest pending first", [p(1), p(2)], me, 1],
    ["pending after an expired lease", [p(1, { first_claimed_at: T0, lease_token: "L1" }), p(2)], me, 1],
    ["my unexpired lease holds the queue in order", [lease(1, "r-1", 1000), p(2)], me, null],
    ["my expired lease is redelivered first", [lease(1, "r-1", -1), p(2)], me, 1],
    ["a lease ending exactly now counts as expired", [lease(1, "r-1", 0), p(2)], me, 1],
    ["another runtime's unexpired lease holds the queue until it expires", [lease(1, "r-old", 1000), p(2)], me, null],
    ["another runtime's expired lease is handed on", [lease(1, "r-old", -1), p(2)], me, 1],
    ["image command skipped without the capability", [p(1, image), p(2)], me, 2],
    ["only image commands, no capability", [p(1, image)], me, null],
    ["image command handed out with the capability", [p(1, image), p(2)], withImages, 1],
    ["final states are never handed out", [p(1, { state: "accepted" }), p(2, { state: "cancelled" })], me, null],
  ];
  for (const [name, active, claimer, expected] of cases) assert.equal(pickClaim(active, T0, claimer)?.seq ?? null, expected, name);
});

test("each lane is its own queue: control commands never wait behind an instruction, nor reach an instruction claim", () => {
  const instructions: Claimer = { runtimeId: "r-1", supportsImages: true, lane: "instructions", stopTtlMs: 30_000 };
  const control: Claimer = { ...instructions, lane: "control" };
  const p = (seq: number, overrides: Partial<CommandRecord> = {}) => record({ seq, command_id: `c-${seq}`, ...overrides });
  const stop = (seq: number, overrides: Partial<CommandRecord> = {}) => p(seq, { kind: "stop", payload: {}, instruction: "", ...overrides });
  const myLease = { state: "leased" as const, lease_token: "L", lease_runtime_id: "r-1", lease_expires_at: at(1000), first_claimed_at: T0 };
  const cases: [string, CommandRecord[], Claimer, number | null][] = [
    ["an instruction claim skips control commands", [stop(1), p(2)], instructions, 2],
    ["an instruction claim gets nothing but control commands", [stop(1), p(2, { kind: "approval_decision", payload: {} })], instructions, null],
    ["a control claim skips instructions", [p(1), stop(2)], control, 2],
    ["a control command is not held up by an instruction's lease", [p(1, myLease), stop(2)], control, 2],
    ["control commands in creation order", [p(1, { kind: "approval_decision", payload: {} }), stop(2)], control, 1],
    ["my unexpired control lease holds the control lane", [stop(1, myLease), stop(2)], control, null],
    ["a stop at the end of its time to live is not handed out", [stop(1, { created_at: at(-30_000) }), stop(2, { created_at: at(-29_999) })], control, 2],
    ["an old approval decision has no time to live here", [p(1, { kind: "approval_decision", payload: {}, created_at: at(-3_600_000) })], control, 1],
  ];
  for (const [name, active, claimer, expected] of cases) assert.equal(pickClaim(active, T0, claimer)?.seq ?? null, expected, name);
});

test("an instruction claim is held only while the runtime says idle; a control claim busy or idle; a host claim always", () => {
  const cases: [Parameters<typeof mayHoldClaim>[0], Parameters<typeof mayHoldClaim>[1], boolean][] = [
    ["instructions", "idle", true],
    ["instructions", "running", false],
    ["control", "idle", true],
    ["control", "running", true],
    ["host", undefined, true],
  ];
  for (const [lane, state, expected] of cases) assert.equal(mayHoldClaim(lane, state), expected, `${lane} ${state}`);
});

test("a stop still pending at the end of its time to live is cancelled as expired; nothing else is", () => {
  const ttl = 30_000;
  const stop = (overrides: Partial<CommandRecord> = {}) => record({ kind: "stop", payload: {}, instruction: "", ...overrides });
  const cases: [string, CommandRecord, Date, boolean][] = [
    ["pending, one millisecond short", stop(), at(ttl - 1), false],
    ["pending, exactly at the time to live", stop(), at(ttl), true],
    ["pending again after an expired lease", stop({ first_claimed_at: at(10), lease_token: "L", deliveries: 1 }), at(ttl + 1), true],
    [
      "leased: the client is at it",
      stop({ state: "leased", lease_token: "L", lease_runtime_id: "r-1", lease_expires_at: at(ttl + 60_000) }),
      at(ttl + 1),
      false,
    ],
    ["accepted", stop({ state: "accepted", outcome: "stopped" }), at(ttl + 1), false],
    ["an instruction never expires", record(), at(ttl * 100), false],
  ];
  for (const [name, r, now, expires] of cases) {
    const patch = stopExpiryPatch(r, now, ttl);
    assert.deepEqual(patch, expires ? { state: "cancelled", images: [], lease_expires_at: null, updated_at: now, cancel_reason: "expired" } : null, name);
  }
});

test("ACK outcomes: a control command must say what happened, from its kind's outcomes; an instruction says nothing", () => {
  const cases: [Parameters<typeof outcomeAllowed>[0], Parameters<typeof outcomeAllowed>[1], boolean][] = [
    ["instruction", undefined, true],
    ["instruction", "stopped", false],
    ["stop", "stopped", true],
    ["stop", "already_idle", true],
    ["stop", "unknown", true],
    ["stop", "applied", false],
    ["stop", undefined, false],
    ["approval_decision", "applied", true],
    ["approval_decision", "already_answered", true],
    ["approval_decision", "mismatch", true],
    ["approval_decision", "unknown", true],
    ["approval_decision", "stopped", false],
  ];
  for (const [kind, outcome, allowed] of cases) assert.equal(outcomeAllowed(kind, outcome), allowed, `${kind} ${outcome}`);
  // Only a stop that stopped a run names a run.
  const run = { started_at: "2026-12-01T10:00:00.000Z", task: "整理日志" };
  assert.equal(outcomeAllowed("stop", "stopped", run), true);
  for (const [kind, outcome] of [
    ["stop", "already_idle"],
    ["stop", "unknown"],
    ["approval_decision", "applied"],
    ["instruction", undefined],
  ] as const) {
    assert.equal(outcomeAllowed(kind, outcome, run), false, `${kind} ${outcome} with a run`);
  }
  // The audit row keeps the run with its secrets masked again.
  assert.deepEqual(
    ackAuditData({ session_id: "s", runtime_id: "r", lease_token: "l", outcome: "stopped", run: { ...run, task: "部署 --password hunter22" } }),
    {
      outcome: "stopped",
      run: { ...run, task: "部署 --password ***" },
    },
  );

  const stopLease = record({
    kind: "stop",
    payload: {},
    instruction: "",
    state: "leased",
    lease_token: "L1",
    lease_runtime_id: "r-1",
    lease_expires_at: at(1000),
    first_claimed_at: T0,
  });
  const ack = { session_id: "s-1", runtime_id: "r-1", lease_token: "L1" };
  const first = decideAck(stopLease, { ...ack, outcome: "stopped" }, T0);
  assert.ok(first.kind === "write");
  assert.equal(first.patch.outcome, "stopped");
  assert.deepEqual(decideAck(stopLease, ack, T0), { kind: "refuse", error: "invalid_request" });
  const accepted = { ...stopLease, ...first.patch };
  assert.deepEqual(decideAck(accepted, { ...ack, outcome: "already_idle" }, T0), { kind: "unchanged" }, "a repeat keeps the first outcome");
  assert.deepEqual(summarize(accepted).outcome, "stopped");
});

test("a claim leases the command and records the first claim only once", () => {
  const first = claimPatch(record(), { token: "L1", runtimeId: "r-1", now: T0, leaseMs: 60_000 });
  assert.deepEqual(first, {
    state: "leased",
    lease_token: "L1",
    lease_runtime_id: "r-1",
    lease_expires_at: at(60_000),
    first_claimed_at: T0,
    deliveries: 1,
    updated_at: T0,
  });
  const again = claimPatch(leased(-1), { token: "L2", runtimeId: "r-2", now: at(90_000), leaseMs: 60_000 });
  assert.equal(again.first_claimed_at, T0);
  assert.equal(again.deliveries, 2);
  assert.equal(again.lease_token, "L2");
});

test("lease expiry returns the command to pending, never to cancellable", () => {
  assert.equal(expiryPatch(leased(1000), T0), null);
  assert.equal(expiryPatch(record(), T0), null);
  const patch = expiryPatch(leased(-1), T0);
  assert.deepEqual(patch, { state: "pending", lease_expires_at: null, updated_at: T0 });
  const expired = { ...leased(-1), ...patch };
  assert.equal(isCancellable(expired), false);
  assert.deepEqual(decideCancel(expired, "s-1", T0), { kind: "refuse", error: "delivery_started" });
});

test("rolling a claim back restores exactly the state before it", () => {
  const expiredLease = record({ lease_token: "L0", lease_runtime_id: "r-1", first_claimed_at: T0, deliveries: 1 });
  const cases: [string, CommandRecord, boolean][] = [
    ["a first claim: cancellable again", record(), true],
    ["a redelivery after expiry: still past the cut-off, the old lease's late ACK counts again", expiredLease, false],
    ["a replaced runtime's lease taken over: that lease again", leased(1000), false],
  ];
  const now = at(5_000);
  for (const [name, before, cancellable] of cases) {
    const claimed = { ...before, ...claimPatch(before, { token: "L-gone", runtimeId: "r-1", now: at(1_000), leaseMs: 60_000 }) };
    const restored = { ...claimed, ...rollbackPatch(before, now) };
    assert.deepEqual(restored, { ...before, updated_at: now }, name);
    assert.equal(isCancellable(restored), cancellable, name);
  }
  const ackOfOldLease = decideAck({ ...expiredLease, ...rollbackPatch(expiredLease, now) }, { session_id: "s-1", runtime_id: "r-1", lease_token: "L0" }, now);
  assert.equal(ackOfOldLease.kind, "write");
});

test("cancel decisions follow the cut-off at the first claim", () => {
  const cases: [string, CommandRecord, string, unknown][] = [
    ["pending, never claimed", record(), "s-1", "write"],
    ["other session", record(), "s-2", { kind: "refuse", error: "not_found" }],
    ["leased", leased(1000), "s-1", { kind: "refuse", error: "delivery_started" }],
    ["pending after a lease", record({ first_claimed_at: T0 }), "s-1", { kind: "refuse", error: "delivery_started" }],
    ["accepted", record({ state: "accepted", first_claimed_at: T0 }), "s-1", { kind: "refuse", error: "already_accepted" }],
    ["cancelled again", record({ state: "cancelled" }), "s-1", { kind: "unchanged" }],
  ];
  for (const [name, r, session, expected] of cases) {
    const decision = decideCancel(r, session, T0);
    if (expected === "write") {
      assert.equal(decision.kind === "write" && decision.patch.state, "cancelled", name);
      assert.equal(decision.kind === "write" && decision.patch.cancel_reason, "operator", name);
    } else {
      assert.deepEqual(decision, expected, name);
    }
  }
  assert.deepEqual(decideCancel(undefined, "s-1", T0), { kind: "refuse", error: "not_found" });
});

test("ack decisions: same lease is idempotent, anything else is refused", () => {
  const ack = { session_id: "s-1", runtime_id: "r-1", lease_token: "L1" };
  const cases: [string, CommandRecord | undefined, typeof ack, unknown][] = [
    ["leased by this lease", leased(1000), ack, "write"],
    ["lease expired, not reclaimed", { ...leased(-1), state: "pending", lease_expires_at: null }, ack, "write"],
    ["accepted by this lease", { ...leased(1000), state: "accepted" }, ack, { kind: "unchanged" }],
    ["reclaimed by a newer lease", { ...leased(1000), lease_token: "L2" }, ack, { kind: "refuse", error: "lease_mismatch" }],
    ["another runtime", leased(1000), { ...ack, runtime_id: "r-9" }, { kind: "refuse", error: "lease_mismatch" }],
    ["never claimed", record(), ack, { kind: "refuse", error: "lease_mismatch" }],
    ["other session", leased(1000), { ...ack, session_id: "s-2" }, { kind: "refuse", error: "not_found" }],
    ["unknown command", undefined, ack, { kind: "refuse", error: "not_found" }],
  ];
  for (const [name, r, input, expected] of cases) {
    const decision = decideAck(r, input, T0);
    if (expected === "write") {
      assert.equal(decision.kind === "write" && decision.patch.state, "accepted", name);
    } else {
      assert.deepEqual(decision, expected, name);
    }
  }
});

test("final states drop image bytes and keep their metadata", () => {
  const image = imageOf("image/png", 100);
  const withImage = { ...leased(1000), images: [image], image_count: 1, image_bytes: 100, image_digest: "abc" };
  for (const decision of [
    decideAck(withImage, { session_id: "s-1", runtime_id: "r-1", lease_token: "L1" }, T0),
    decideCancel({ ...withImage, state: "pending", first_claimed_at: null }, "s-1", T0),
  ]) {
    assert.ok(decision.kind === "write");
    const after = { ...withImage, ...decision.patch };
    assert.deepEqual(after.images, []);
    assert.equal(after.image_count, 1);
    assert.equal(after.image_bytes, 100);
    assert.equal(after.image_digest, "abc");
  }
});

test("create decisions: request key reuse, conflict and the image budget", () => {
  const stored = record({ request_key: "k", request_digest: "same", state: "cancelled" });
  const budget = LIMITS.imageBudgetBytes;
  const cases: [string, CommandRecord | undefined, string, number, number, unknown][] = [
    ["same key, same content (even cancelled)", stored, "same", 0, 0, { kind: "reuse", record: stored }],
    ["same key, same content, budget full", stored, "same", budget, 10, { kind: "reuse", record: stored }],
    ["same key, other content", stored, "other", 0, 0, { kind: "refuse", error: "idempotency_key_reused" }],
    ["new, fits exactly", undefined, "x", budget - 10, 10, { kind: "insert" }],
    ["new, one byte over", undefined, "x", budget - 10, 11, { kind: "refuse", error: "image_budget_exceeded" }],
    ["new text command while the budget is full", undefined, "x", budget, 0, { kind: "insert" }],
  ];
  for (const [name, sameKey, digest, active, bytes, expected] of cases) {
    assert.deepEqual(decideCreate(sameKey, digest, active, bytes, budget), expected, name);
  }
});

test("the request digest covers session, event, instruction and images", () => {
  const base = { session_id: "s-1", event_id: "e-1", instruction: "go", image_digest: null };
  const variants = [
    { ...base, session_id: "s-2" },
    { ...base, event_id: null },
    { ...base, instruction: "go!" },
    { ...base, image_digest: "abc" },
  ];
  for (const variant of variants) assert.notEqual(requestDigest(variant), requestDigest(base), JSON.stringify(variant));
  assert.equal(requestDigest({ ...base }), requestDigest(base));
  const stop = { ...base, control: { kind: "stop" as const, payload: {} } };
  assert.notEqual(requestDigest(stop), requestDigest(base));
  assert.notEqual(requestDigest({ ...stop, control: { kind: "approval_decision", payload: {} } }), requestDigest(stop));
});

/** The signature and IHDR chunk (with its CRC) of a real 1×1 PNG, and nothing after. */
function realPngHead(): Buffer {
  return Buffer.from(imageOf("image/png", 1).data, "base64").subarray(0, 33);
}

function withBadHeaderCrc(png: Buffer): Buffer {
  const copy = Buffer.from(png);
  copy.writeUInt8(copy.readUInt8(29) ^ 0xff, 29); // the IHDR chunk's CRC
  return copy;
}

test("the decoded header decides the image type and its dimensions, never magic bytes alone; the whole image must decode", () => {
  const bytes = (buffer: Buffer, mime: CommandImage["mime_type"] = "image/png"): CommandImage[] => [{ mime_type: mime, data: buffer.toString("base64") }];
  const cases: [string, CommandImage[], RegExp | null][] = [
    ...(["image/png", "image/jpeg", "image/gif", "image/webp"] as const).map((mime): [string, CommandImage[], null] => [
      `a ${mime} header`,
      [imageOf(mime, 64)],
      null,
    ]),
    ["an 8-byte PNG signature", bytes(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), /not a PNG, JPEG, GIF or WebP image/],
    ["a JPEG start without a frame", bytes(Buffer.from([0xff, 0xd8, 0xff, 0xe0]), "image/jpeg"), /not a PNG, JPEG, GIF or WebP image/],
    // A header cut short is not an image at all: the decoder is never let read past the input's end.
    ["a GIF signature alone", bytes(Buffer.from("GIF89a", "latin1"), "image/gif"), /not a PNG, JPEG, GIF or WebP image/],
    [
      "a WebP signature alone",
      bytes(Buffer.concat([Buffer.from("RIFF", "latin1"), Buffer.alloc(4), Buffer.from("WEBPVP8 ", "latin1")]), "image/webp"),
      /not a PNG, JPEG, GIF or WebP image/,
    ],
    ["a zero-width PNG", bytes(imageHeader("image/png", 0, 10)), /dimensions/],
    ["a PNG wider than 16384", bytes(imageHeader("image/png", 20_000, 10)), /dimensions/],
    ["a PNG of 10000 × 10000", bytes(imageHeader("image/png", 10_000, 10_000)), /dimensions/],
    ["text", bytes(Buffer.from("hello world, not an image")), /not a PNG, JPEG, GIF or WebP image/],
    ["nothing", bytes(Buffer.alloc(0)), /not a PNG, JPEG, GIF or WebP image/],
    ["a GIF declared as PNG", [{ ...imageOf("image/gif", 64), mime_type: "image/png" }], /content is image\/gif, declared image\/png/],
    // A header that decodes is not yet an image: the whole of it must.
    ["a valid 1×1 PNG header followed by 2 KB of garbage", bytes(Buffer.concat([realPngHead(), Buffer.alloc(2048, 0x5a)])), /does not decode as a whole/],
    ["a PNG whose header checksum is wrong", bytes(withBadHeaderCrc(Buffer.from(imageOf("image/png", 100).data, "base64"))), /does not decode as a whole/],
    [
      "a GIF header followed by garbage",
      bytes(Buffer.concat([imageHeader("image/gif", 1, 1), Buffer.alloc(2048, 0x5a)]), "image/gif"),
      /does not decode as a whole/,
    ],
    [
      "a JPEG cut after its frame header",
      bytes(Buffer.from(imageOf("image/jpeg", 64).data, "base64").subarray(0, 200), "image/jpeg"),
      /does not decode as a whole/,
    ],
    ["a GIF cut before its trailer", bytes(Buffer.from(imageOf("image/gif", 64).data, "base64").subarray(0, 30), "image/gif"), /does not decode as a whole/],
  ];
  for (const [name, images, problem] of cases) {
    const check = checkImages(images);
    if (problem === null) assert.ok(check.ok, name);
    else assert.match(check.ok ? "accepted" : check.issues.map((i) => i.message).join("; "), problem, name);
  }
});

test("image checks: per-image size, per-command size, declared type", () => {
  const cases: [string, CommandImage[], string[] | null][] = [
    ["one small PNG", [imageOf("image/png", 100)], null],
    ["an image of exactly 4 MiB", [imageOf("image/jpeg", LIMITS.imageBytes)], null],
    ["an image one byte over 4 MiB", [imageOf("image/png", LIMITS.imageBytes + 1)], ["images.0.data"]],
    ["two images of exactly 8 MiB together", [imageOf("image/png", LIMITS.imageBytes), imageOf("image/gif", LIMITS.imageBytes)], null],
    [
      "three images over 8 MiB together",
      [imageOf("image/png", LIMITS.imageBytes), imageOf("image/png", LIMITS.imageBytes), imageOf("image/webp", 1)],
      ["images"],
    ],
    ["PNG bytes declared as JPEG", [{ ...imageOf("image/png", 100), mime_type: "image/jpeg" }], ["images.0.data"]],
    ["text declared as PNG", [{ mime_type: "image/png", data: Buffer.from("plain text").toString("base64") }], ["images.0.data"]],
  ];
  for (const [name, images, issuePaths] of cases) {
    const check = checkImages(images);
    if (issuePaths === null) {
      assert.ok(check.ok, name);
      assert.equal(check.facts.count, images.length, name);
      assert.equal(
        check.facts.bytes,
        images.reduce((sum, i) => sum + Buffer.from(i.data, "base64").length, 0),
        name,
      );
    } else {
      assert.ok(!check.ok, name);
      assert.deepEqual(
        check.issues.map((i) => i.path),
        issuePaths,
        name,
      );
    }
  }
});

test("the image digest changes with type, bytes and order", () => {
  const a = imageOf("image/png", 50, 1);
  const b = imageOf("image/png", 50, 2);
  const digest = (images: CommandImage[]) => {
    const check = checkImages(images);
    assert.ok(check.ok);
    return check.facts.digest;
  };
  assert.equal(digest([]), null);
  assert.notEqual(digest([a]), digest([b]));
  assert.notEqual(digest([a, b]), digest([b, a]));
  assert.equal(digest([a, b]), digest([{ ...a }, { ...b }]));
});

test("summaries carry a bounded preview and never lease tokens or image bytes", () => {
  const long = "长".repeat(500);
  const summary = summarize({ ...leased(1000), instruction: long, images: [imageOf("image/png", 10)], image_count: 1 });
  assert.equal(Array.from(summary.preview).length, LIMITS.previewChars);
  assert.ok(summary.preview.endsWith("…"));
  assert.equal(summary.cancellable, false);
  assert.equal(summary.image_count, 1);
  const text = JSON.stringify(summary);
  assert.ok(!text.includes("L1"));
  assert.ok(!text.includes("data"));
  assert.equal(summarize(record({ instruction: "short" })).preview, "short");
  assert.equal(summarize(record()).cancellable, true);
  assert.deepEqual([summarize(record()).kind, summarize(record()).outcome, summarize(record()).cancel_reason], ["instruction", null, null]);
});
