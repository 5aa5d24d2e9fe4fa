/** A tool offered in the session's language: registered once per language, switched in and out otherwise. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { offeredTool } from "../../extension/pi-handlers.ts";

function fakePi() {
  let active: string[] = ["read"];
  const registered: string[] = [];
  return {
    registered,
    active: () => active,
    pi: { getActiveTools: () => active, setActiveTools: (names: string[]) => void (active = names) },
    register: (language: () => string) => () => {
      // Pi activates a tool the first time it is registered; registered again, it keeps its state.
      if (registered.length === 0) active = [...active, "ask"];
      registered.push(language());
    },
  };
}

test("offered again in the same language it is switched back in; in another language it is registered again and active", () => {
  const fake = fakePi();
  let language = "en-US";
  const tool = offeredTool(
    fake.pi,
    "ask",
    fake.register(() => language),
  );
  tool.withdraw();
  assert.deepEqual(fake.registered, [], "withdrawing a tool never offered touches nothing");
  tool.offer(language);
  tool.withdraw();
  assert.deepEqual(fake.active(), ["read"]);
  tool.offer(language);
  assert.deepEqual([fake.registered, fake.active()], [["en-US"], ["read", "ask"]]);
  tool.withdraw();
  language = "zh-CN";
  tool.offer(language);
  assert.deepEqual(
    [fake.registered, fake.active()],
    [
      ["en-US", "zh-CN"],
      ["read", "ask"],
    ],
  );
});
