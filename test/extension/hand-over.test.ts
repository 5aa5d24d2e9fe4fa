/**
 * The hand-over runs after the Pi handler that made the notices: in order, builders included, and
 * a builder that throws is reported without keeping the others from going out.
 */
import assert from "node:assert/strict";
import test from "node:test";
import { setImmediate } from "node:timers/promises";
import type { Notifier } from "../../extension/notices/notifier.ts";
import { createHandOver } from "../../extension/notices/hand-over.ts";
import type { EventBody } from "../../protocol/events.ts";

const notice = (id: string) => ({ event_id: id }) as EventBody;

test("hand-over: notices and builders go out in order after the handler, a throwing builder is reported", async () => {
  const sent: string[] = [];
  const failures: string[] = [];
  const notifier = { send: (event: EventBody) => sent.push(event.event_id) } as unknown as Notifier;
  const handOver = createHandOver((error) => failures.push(String(error)));
  let built = false;
  handOver.enqueue(notifier, notice("a"), { final: true });
  handOver.enqueue(
    notifier,
    () => {
      built = true;
      return notice("b");
    },
    { final: true },
  );
  handOver.enqueue(
    notifier,
    () => {
      throw new Error("boom");
    },
    { final: true },
  );
  handOver.enqueue(notifier, () => undefined, { final: true });
  handOver.enqueue(notifier, notice("c"), { final: false });
  // Nothing is built or sent inside the handler's own turn.
  assert.equal(built, false);
  assert.deepEqual(sent, []);
  await setImmediate();
  assert.deepEqual(sent, ["a", "b", "c"]);
  assert.deepEqual(failures, ["Error: boom"]);
});

test("hand-over: drain sends what waits at once (shutdown)", () => {
  const sent: string[] = [];
  const notifier = { send: (event: EventBody) => sent.push(event.event_id) } as unknown as Notifier;
  const handOver = createHandOver(() => assert.fail("nothing throws"));
  handOver.enqueue(notifier, () => notice("a"), { final: true });
  handOver.drain();
  assert.deepEqual(sent, ["a"]);
});
