/**
 * The receipt watch follows one accepted notice at a time: a burst of notices costs a look or
 * two, not one request per notice, and the first failed receipt is still told once.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { setTimeout as delay } from "node:timers/promises";
import { ReceiptWatch } from "../../extension/notices/receipt-watch.ts";
import type { ApiClient } from "../../extension/server-client/http-client.ts";
import { Receipt, type ReceiptState } from "../../protocol/events.ts";
import { waitUntil } from "../../harness/wait.ts";

/** A client whose receipts are scripted per event (each look takes the next state; the last repeats). */
function scriptedClient(states: Record<string, ReceiptState[]>) {
  const looked: string[] = [];
  const client: ApiClient = {
    async request(_method: string, path: string) {
      const eventId = decodeURIComponent(path.replace(/^events\//, ""));
      looked.push(eventId);
      const script = states[eventId] ?? ["delivered"];
      const state = script.length > 1 ? script.shift()! : script[0]!;
      const at = new Date(0).toISOString();
      return Receipt.parse({
        event_id: eventId,
        session_id: "s",
        status: "completed",
        state,
        attempts: 1,
        created_at: at,
        updated_at: at,
        error: state === "failed" ? "no_persona" : null,
      });
    },
  } as ApiClient;
  return { client, looked };
}

interface Case {
  name: string;
  /** Accepted one after another at once, each as `queued` unless it says otherwise. */
  accepted: (string | [string, ReceiptState])[];
  states: Record<string, ReceiptState[]>;
  /** The looks the watch makes, in order, once it is done. */
  looked: string[];
  told?: string;
}

const cases: Case[] = [
  {
    name: "one notice is looked at until its receipt is final",
    accepted: ["a"],
    states: { a: ["queued", "processing", "delivered"] },
    looked: ["a", "a", "a"],
  },
  { name: "a burst is followed by its first notice, then the newest one accepted meanwhile", accepted: ["a", "b", "c", "d"], states: {}, looked: ["a", "d"] },
  { name: "an answer that is already final is not followed", accepted: [["a", "delivered"], "b"], states: {}, looked: ["b"] },
  {
    name: "the newest notice's failure is told once, after the first was delivered",
    accepted: ["a", "b", "c"],
    states: { c: ["failed"] },
    looked: ["a", "c"],
    told: "c",
  },
  { name: "a failure told stops the watch: the newest waiting is never looked at", accepted: ["a", "b"], states: { a: ["failed"] }, looked: ["a"], told: "a" },
  {
    name: "a receipt never final is given up after the last look, then the newest is followed",
    accepted: ["a", "b"],
    states: { a: ["queued"] },
    looked: ["a", "a", "a", "b"],
  },
];

for (const c of cases) {
  test(`receipt watch: ${c.name}`, async () => {
    const { client, looked } = scriptedClient(structuredClone(c.states));
    const told: string[] = [];
    const watch = new ReceiptWatch(client, (eventId) => told.push(eventId), { looks: [5, 5, 5] });
    for (const entry of c.accepted) {
      const [eventId, state] = typeof entry === "string" ? [entry, "queued" as const] : entry;
      watch.accepted(eventId, state);
    }
    await waitUntil(
      () => looked.length >= c.looked.length,
      () => `looks ${JSON.stringify(looked)}`,
    );
    // Nothing more comes: the looks are 5 ms apart, so ten times that would show a stray one.
    await delay(50);
    watch.close();
    assert.deepEqual(looked, c.looked);
    assert.deepEqual(told, c.told ? [c.told] : []);
  });
}

test("receipt watch: close stops a pending look and forgets the newest", async () => {
  const { client, looked } = scriptedClient({});
  const watch = new ReceiptWatch(client, () => assert.fail("nothing to tell"), { looks: [20] });
  watch.accepted("a", "queued");
  watch.accepted("b", "queued");
  watch.close();
  await delay(60);
  assert.deepEqual(looked, []);
});
