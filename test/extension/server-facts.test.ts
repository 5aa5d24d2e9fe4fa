import { test } from "node:test";
import assert from "node:assert/strict";
import { ServerFacts } from "../../extension/server-client/server-facts.ts";
import { modelSupportsImages } from "../../extension/session/label-rules.ts";

type Step = "open" | "close" | "forget" | { accept: "idle" | "running"; protocol?: number };

const apply = (facts: ServerFacts, step: Step) => {
  if (step === "open") facts.open();
  else if (step === "close") facts.close();
  else if (step === "forget") facts.forget();
  else facts.accept(step.accept, step.protocol);
};

test("the record says what the server's latest answer said, and only while presence runs", () => {
  const rows: { steps: Step[]; accepted: boolean; heardIdle: boolean; protocol: number }[] = [
    { steps: [], accepted: false, heardIdle: false, protocol: 2 },
    { steps: ["open"], accepted: false, heardIdle: false, protocol: 2 },
    { steps: ["open", { accept: "idle", protocol: 3 }], accepted: true, heardIdle: true, protocol: 3 },
    { steps: ["open", { accept: "running", protocol: 3 }], accepted: true, heardIdle: false, protocol: 3 },
    // An older server names no protocol: 2.
    { steps: ["open", { accept: "idle", protocol: 3 }, { accept: "idle" }], accepted: true, heardIdle: true, protocol: 2 },
    // A failed heartbeat: the server may not know the state any more; the protocol it said stays.
    { steps: ["open", { accept: "idle", protocol: 3 }, "forget"], accepted: false, heardIdle: false, protocol: 3 },
    { steps: ["open", { accept: "idle", protocol: 3 }, "close"], accepted: false, heardIdle: false, protocol: 3 },
    // An answer that lands after presence stopped never counts as heard idle.
    { steps: ["open", "close", { accept: "idle", protocol: 3 }], accepted: true, heardIdle: false, protocol: 3 },
    { steps: ["open", { accept: "idle" }, "close", "open"], accepted: false, heardIdle: false, protocol: 2 },
  ];
  for (const row of rows) {
    const facts = new ServerFacts();
    for (const step of row.steps) apply(facts, step);
    const seen = { accepted: facts.accepted(), heardIdle: facts.heardIdle(), protocol: facts.commandProtocol() };
    assert.deepEqual(seen, { accepted: row.accepted, heardIdle: row.heardIdle, protocol: row.protocol }, JSON.stringify(row.steps));
  }
});

test("a wait for acceptance ends yes on the next accepted heartbeat, no when presence stops, at once when closed or already accepted", async () => {
  const facts = new ServerFacts();
  assert.equal(await facts.whenAccepted(), false);
  facts.open();
  const first = facts.whenAccepted();
  facts.accept("idle", 3);
  assert.equal(await first, true);
  assert.equal(await facts.whenAccepted(), true);
  facts.forget();
  const second = facts.whenAccepted();
  facts.close();
  assert.equal(await second, false);
});

test("listeners hear every accepted heartbeat until they unsubscribe", () => {
  const facts = new ServerFacts();
  facts.open();
  let heard = 0;
  const off = facts.onAccepted(() => heard++);
  facts.accept("running", 3);
  facts.forget();
  facts.accept("idle", 3);
  off();
  facts.accept("idle", 3);
  assert.equal(heard, 2);
});

test("image support is declared only for a model that takes images", () => {
  const rows: [{ input: readonly string[] } | undefined, boolean][] = [
    [{ input: ["text", "image"] }, true],
    [{ input: ["text"] }, false],
    [{ input: [] }, false],
    [undefined, false],
  ];
  for (const [model, expected] of rows) assert.equal(modelSupportsImages(model), expected, JSON.stringify(model));
});
