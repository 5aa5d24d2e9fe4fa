/**
 * Run limits in a real Pi session (SDK + faux model) with this extension: `--anon-notify-limits`
 * over its turns stops the run before the next model call, its final notice says why (failed,
 * `turn_limit`, in the session's language) and so does the terminal; a time limit stops it too.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { rmSync } from "node:fs";
import { LIMITS_FLAG, START_ON_FLAG } from "../../activation.ts";
import { runRecorderFor } from "../../extension/run-recorder.ts";
import { installRunLimits } from "../../extension/session/run-limits.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import type { RunOutcome } from "../../lifecycle.ts";
import { FAILURE_WORDS } from "../../common/failure-words.ts";
import { ai, echoTool, makeRoot, startPi, type ExtensionAPI, type PiHarness } from "../../harness/pi.ts";
import { configureExtension, startWebhook } from "../../harness/webhook.ts";
import { waitUntil } from "../../harness/wait.ts";

const echoTurn = () => ai.fauxAssistantMessage([ai.fauxToolCall("echo", {})], { stopReason: "toolUse" });

for (const language of ["en-US", "zh-CN"] as const) {
  test(`a run over its turn limit is stopped before the next model call and says so (${language})`, { timeout: 60_000 }, async (t) => {
    const webhook = await startWebhook();
    const root = makeRoot();
    configureExtension(root, webhook.endpoint, { language });
    let pi: PiHarness | undefined;
    t.after(async () => {
      await pi?.dispose({ keepRoot: true }).catch(() => undefined);
      await webhook.close();
      rmSync(root, { recursive: true, force: true });
    });
    pi = await startPi({ root, tools: [echoTool()], flags: { [START_ON_FLAG]: true, [LIMITS_FLAG]: '{"turns":2}' } });
    pi.script([echoTurn(), echoTurn(), echoTurn(), ai.fauxAssistantMessage("never reached")]);
    await pi.prompt("loop forever");

    assert.equal(pi.modelCalls.length, 2, "two turns ran; the third was stopped before its model call");
    const [event] = await webhook.waitForEvents(1);
    const body = event!.body;
    assert.equal(body.status, "failed");
    assert.equal(body.details?.failure_reason, "turn_limit");
    assert.deepEqual(body.details?.said, { key: "run_failed", params: { project: "work", reason: "turn_limit" } });
    assert.ok(body.summary.includes(FAILURE_WORDS[language].turn_limit), body.summary);
    const said = messagesFor(language).session.limitStopped("turn_limit", { turns: 2 });
    assert.ok(pi.notices().includes(said), `the terminal says it: ${pi.notices().join(" | ")}`);
    assert.ok(pi.session.isIdle);
  });
}

test("a time limit stops the run in progress when its timer fires", { timeout: 60_000 }, async (t) => {
  const fire: (() => void)[] = [];
  const outcomes: RunOutcome[] = [];
  const waits: number[] = [];
  // The guard alone, with its timer in the test's hand: nothing waits a minute.
  const limited = (pi: ExtensionAPI) => {
    const recorder = runRecorderFor(pi);
    recorder.observe({ settled: (s) => void (s && outcomes.push(s.outcome)) }, { exact: false });
    installRunLimits(pi, recorder, {
      report: () => {},
      text: () => messagesFor("en-US"),
      schedule: (ms, run) => {
        waits.push(ms);
        fire.push(run);
        return () => {};
      },
    });
  };
  const pi = await startPi({ extension: false, extensions: [limited], tools: [echoTool()], flags: { [LIMITS_FLAG]: '{"minutes":1}' } });
  t.after(() => pi.dispose());
  let release: () => void = () => {};
  const held = new Promise<void>((done) => (release = done));
  pi.script([
    async () => {
      await held;
      return echoTurn();
    },
    echoTurn(),
    ai.fauxAssistantMessage("never reached"),
  ]);
  const run = pi.prompt("take your time");
  await waitUntil(() => (fire.length === 1 ? true : undefined), "the time limit was scheduled");
  assert.ok(waits[0]! > 0 && waits[0]! <= 60_000);
  fire[0]!();
  release();
  await run;
  assert.deepEqual(outcomes, [{ kind: "failed", stopReason: "aborted", reason: "time_limit", errorMessage: null }]);
  assert.equal(pi.modelCalls.length, 1);
});

test("limits that do not parse are not dropped: the terminal says so and the run is stopped before its first model call", { timeout: 60_000 }, async (t) => {
  const root = makeRoot();
  configureExtension(root, "http://127.0.0.1:9/events", { language: "en-US" });
  const pi = await startPi({ root, tools: [echoTool()], flags: { [LIMITS_FLAG]: '{"turns":0}' } });
  t.after(() => pi.dispose());
  assert.ok(pi.notices().includes(messagesFor("en-US").session.limitsInvalid('"{\\"turns\\":0}"')), pi.notices().join(" | "));
  pi.script([ai.fauxAssistantMessage("never reached")]);
  await pi.prompt("anything");
  assert.equal(pi.modelCalls.length, 0);
});
