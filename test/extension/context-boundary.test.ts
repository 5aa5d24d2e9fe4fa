/**
 * The model's context is untouched by the extension: the same scripted session run with the
 * extension active and without it sends the faux model exactly the same messages — the same
 * system prompt, the same tools, no status message.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { ai, makeRoot, startPi, terminatingTool, type ModelCall } from "../../harness/pi.ts";
import { configureExtension, startWebhook } from "../../harness/webhook.ts";

/** One scripted conversation: a toggle, a tool turn, a reply, and a run that terminates by tool. */
async function conversation(withExtension: boolean): Promise<{ calls: ModelCall[]; root: string; notices: number }> {
  const webhook = await startWebhook();
  const root = makeRoot();
  configureExtension(root, webhook.endpoint);
  const pi = await startPi({ root, extension: withExtension, tools: [terminatingTool("finish")] });
  try {
    if (withExtension) await pi.prompt("/anon-notify");
    pi.script([
      ai.fauxAssistantMessage(ai.fauxToolCall("read", { path: "missing.txt" }, { id: "call-read" }), { stopReason: "toolUse" }),
      ai.fauxAssistantMessage("looked at it"),
    ]);
    await pi.prompt("look at missing.txt");
    if (withExtension) {
      await pi.prompt("/anon-notify");
      await pi.prompt("/anon-notify");
    }
    pi.script([ai.fauxAssistantMessage(ai.fauxToolCall("finish", {}, { id: "call-finish" }), { stopReason: "toolUse" })]);
    await pi.prompt("finish");
    const notices = withExtension ? (await webhook.waitForEvents(2)).length : webhook.events.length;
    return { calls: pi.modelCalls, root, notices };
  } finally {
    await pi.dispose({ keepRoot: true });
    await webhook.close();
  }
}

/** Temp roots, clock values and the faux provider's per-instance api id differ between two runs; nothing else may. */
function normalise(calls: ModelCall[], root: string): unknown {
  const text = JSON.stringify(calls).split(root).join("<root>");
  return JSON.parse(text, (key, value) => (key === "timestamp" || key === "durationMs" ? 0 : key === "api" ? "faux" : value));
}

test("the faux model receives the same context with the extension active as without it", async () => {
  const absent = await conversation(false);
  const active = await conversation(true);
  try {
    assert.equal(active.notices, 2, "the extension was really active");
    assert.equal(active.calls.length, 3);
    const expected = normalise(absent.calls, absent.root);
    const actual = normalise(active.calls, active.root);
    // Dates in the system prompt can differ if the runs straddle midnight; compare everything else.
    const withoutDates = (value: unknown) => JSON.stringify(value).replace(/\d{4}-\d{2}-\d{2}/g, "<date>");
    assert.equal(withoutDates(actual), withoutDates(expected));
    assert.doesNotMatch(JSON.stringify(actual), /anon-notify|Anon 通知/);
  } finally {
    rmSync(absent.root, { recursive: true, force: true });
    rmSync(active.root, { recursive: true, force: true });
  }
});
