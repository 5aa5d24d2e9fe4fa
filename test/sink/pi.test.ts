/**
 * The sink inside a REAL Pi session (SDK + faux model, harness/pi.ts) talking to a REAL
 * Unix-socket listener: every event, the hold/merge rule, interrupts, tools, the whitelist and
 * every way the app can be missing or misbehave.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Type } from "typebox";
import type { ExtensionAPI, ToolDefinition } from "@earendil-works/pi-coding-agent";
import { DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";
import type { SinkEnvelope, SinkEventType } from "../../protocol/sink.ts";
import { installSink, type InstalledSink, type SinkConfig } from "../../extension/sink/index.ts";
import { startSinkListener, type SinkListener, type SinkListenerOptions } from "../../harness/sink-listener.ts";
import { ensureSinkToken } from "../../extension/sink/token.ts";
import { ABORT_SCENARIOS } from "../helpers/abort-scenarios.ts";
import { ai, echoTool, latch, startPi, waitForAbortStep, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";

interface SinkRig {
  pi: PiHarness;
  listener: SinkListener | undefined;
  sink: InstalledSink | undefined;
  config: SinkConfig;
  debugLines: string[];
  /** Waits until the settled run's completion is decided and everything queued reached the socket. */
  flush(): Promise<void>;
  types(): SinkEventType[];
}

interface RigOptions {
  listener?: Partial<SinkListenerOptions> | false;
  sink?: Partial<SinkConfig>;
  pi?: StartPiOptions;
  /** Extensions loaded after the sink (e.g. a goal-like loop). */
  extensions?: ((pi: ExtensionAPI) => void)[];
  /** Install the sink twice on the same Pi binding, as a repeated session_start would. */
  installTwice?: boolean;
}

async function rig(t: TestContext, options: RigOptions = {}): Promise<SinkRig> {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-sink-pi-"));
  const config: SinkConfig = {
    ...DEFAULT_CONFIG.sink,
    enabled: true,
    socket: join(dir, "notify.sock"),
    tokenFile: join(dir, "notify.token"),
    ...options.sink,
  };
  const listener =
    options.listener === false ? undefined : await startSinkListener({ socket: config.socket, token: ensureSinkToken(config.tokenFile), ...options.listener });
  const debugLines: string[] = [];
  let sink: InstalledSink | undefined;
  const pi = await startPi({
    extension: false,
    ...options.pi,
    extensions: [
      (api) => {
        for (let n = options.installTwice ? 2 : 1; n > 0; n--) sink = installSink(api, config, { debug: (line) => debugLines.push(line) });
      },
      ...(options.extensions ?? []),
    ],
  });
  t.after(async () => {
    await pi.dispose();
    await listener?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return {
    pi,
    listener,
    get sink() {
      return sink;
    },
    config,
    debugLines,
    flush: async () => {
      await sink?.flush();
    },
    types: () => listener?.events.map((e) => e.type) ?? [],
  };
}

function only<T extends SinkEventType>(events: SinkEnvelope[], type: T): Extract<SinkEnvelope, { type: T }> {
  const found = events.filter((e): e is Extract<SinkEnvelope, { type: T }> => e.type === type);
  assert.equal(found.length, 1, `exactly one ${type} in ${events.map((e) => e.type).join(",")}`);
  return found[0]!;
}

/** A tool whose calls each wait for the test to open their gate, keyed by the call's `key` argument. */
function gatedTool(name: string, executionMode: "parallel" | "sequential") {
  const gates = new Map<string, () => void>();
  const running = new Map<string, ReturnType<typeof latch>>();
  const runningLatch = (key: string) => running.get(key) ?? running.set(key, latch()).get(key)!;
  const tool: ToolDefinition = {
    name,
    label: name,
    description: "Waits for the test.",
    parameters: Type.Object({ key: Type.String() }),
    executionMode,
    async execute(_id, params: { key: string }) {
      await new Promise<void>((resolve) => {
        gates.set(params.key, resolve);
        runningLatch(params.key).signal();
      });
      return { content: [{ type: "text", text: `SECRET TOOL OUTPUT ${params.key}` }], details: undefined };
    },
  };
  return { tool, running: (key: string) => runningLatch(key).promise, open: (key: string) => gates.get(key)!() };
}

const toolCalls = (name: string, keys: string[]) =>
  ai.fauxAssistantMessage(
    keys.map((key) => ai.fauxToolCall(name, { key }, { id: `call-${key}` })),
    { stopReason: "toolUse" },
  );

test("a plain run sends run.started then run.completed, one envelope each, same run_id", async (t) => {
  const r = await rig(t);
  r.pi.script([ai.fauxAssistantMessage("All done, the bug is fixed.")]);
  await r.pi.prompt("please fix the login bug");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.completed"]);
  const events = r.listener!.events;
  const started = only(events, "run.started");
  const completed = only(events, "run.completed");
  const sessionId = r.pi.session.sessionManager.getSessionId();
  assert.equal(started.session_id, sessionId);
  assert.equal(completed.session_id, sessionId);
  assert.deepEqual(started.payload, { run_id: started.payload.run_id, project: "work", model: "faux/faux-1", prompt: "please fix the login bug" });
  assert.equal(completed.payload.run_id, started.payload.run_id);
  assert.equal(completed.payload.had_response, true);
  assert.equal(completed.payload.answer, "All done, the bug is fixed.");
  assert.ok(completed.payload.answered_at && completed.payload.answered_at <= completed.ts, "answered before it was sent");
  assert.equal(typeof completed.payload.duration_seconds, "number");
  assert.deepEqual(r.pi.extensionErrors, []);
});

test("a named session reports its name as agent_name on start and completion", async (t) => {
  const r = await rig(t);
  r.pi.session.setSessionName("login refactor");
  r.pi.script([ai.fauxAssistantMessage("ok")]);
  await r.pi.prompt("go");
  await r.flush();
  assert.equal(only(r.listener!.events, "run.started").payload.agent_name, "login refactor");
  assert.equal(only(r.listener!.events, "run.completed").payload.agent_name, "login refactor");
});

test("sequential tool calls each start when their turn comes", async (t) => {
  const gated = gatedTool("step", "sequential");
  const r = await rig(t, { pi: { tools: [gated.tool] } });
  r.pi.script([toolCalls("step", ["a", "b"]), ai.fauxAssistantMessage("both steps done")]);
  const run = r.pi.prompt("two steps");
  await gated.running("a");
  await r.listener!.waitFor((events) => events.some((e) => e.type === "tool.started"));
  assert.deepEqual(r.types(), ["run.started", "tool.started"], "b has not started while a runs");
  gated.open("a");
  await gated.running("b");
  gated.open("b");
  await run;
  await r.flush();
  const tools = r.listener!.events.filter((e) => e.type.startsWith("tool."));
  assert.deepEqual(
    tools.map((e) => `${e.type}:${"tool_call_id" in e.payload ? e.payload.tool_call_id : ""}`),
    ["tool.started:call-a", "tool.completed:call-a", "tool.started:call-b", "tool.completed:call-b"],
  );
  for (const e of tools) if (e.type === "tool.completed") assert.equal(e.payload.ok, true);
  assert.equal(r.types().at(-1), "run.completed");
});

test("parallel tool calls complete in their real completion order", async (t) => {
  const gated = gatedTool("fetch", "parallel");
  const r = await rig(t, { pi: { tools: [gated.tool] } });
  r.pi.script([toolCalls("fetch", ["first", "second"]), ai.fauxAssistantMessage("fetched")]);
  const run = r.pi.prompt("fetch both");
  await gated.running("first");
  await gated.running("second");
  gated.open("second");
  await r.listener!.waitFor((events) => events.some((e) => e.type === "tool.completed"));
  gated.open("first");
  await run;
  await r.flush();
  const tools = r.listener!.events.filter((e) => e.type.startsWith("tool."));
  assert.deepEqual(
    tools.map((e) => `${e.type}:${"tool_call_id" in e.payload ? e.payload.tool_call_id : ""}`),
    ["tool.started:call-first", "tool.started:call-second", "tool.completed:call-second", "tool.completed:call-first"],
  );
});

for (const scenario of ABORT_SCENARIOS) {
  test(`an interrupt ${scenario.name}: run.cancelled, never completed or failed`, async (t) => {
    const { pi, interrupt } = scenario.prepare();
    const r = await rig(t, { pi });
    await interrupt(r.pi);
    await r.flush();
    assert.deepEqual(r.types(), scenario.sinkEvents);
    const cancelled = only(r.listener!.events, "run.cancelled");
    assert.equal(cancelled.payload.run_id, only(r.listener!.events, "run.started").payload.run_id);
    for (const call of r.listener!.events.filter((e) => e.type === "tool.completed")) {
      assert.equal((call.payload as { ok: boolean }).ok, false, "an interrupted tool call closes as not ok");
    }
  });
}

test("a terminal model error sends run.failed as 'Type: message', never completed", async (t) => {
  const r = await rig(t, { pi: { settings: { retry: { enabled: false } } } });
  r.pi.script([ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "invalid api key" })]);
  await r.pi.prompt("go");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.failed"]);
  assert.equal(only(r.listener!.events, "run.failed").payload.error, "ModelError: invalid api key");
});

test("auto-retries are one run: started once, completed once", async (t) => {
  const r = await rig(t);
  r.pi.script([
    ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "503 overloaded" }),
    ai.fauxAssistantMessage("", { stopReason: "error", errorMessage: "503 overloaded" }),
    ai.fauxAssistantMessage("recovered"),
  ]);
  await r.pi.prompt("flaky provider");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.completed"]);
  assert.equal(only(r.listener!.events, "run.completed").payload.answer, "recovered");
});

/** An extension that keeps the session working for `rounds` settled runs, like a goal loop; an interrupt stops it. */
function goalLoop(rounds: number) {
  let settled = 0;
  let interrupted = false;
  return (pi: ExtensionAPI) => {
    pi.on("agent_end", (_event, ctx) => {
      interrupted ||= ctx.signal?.aborted === true;
    });
    pi.on("agent_settled", () => {
      settled++;
      if (settled < rounds && !interrupted) {
        pi.sendMessage({ customType: "goal", content: `continue, round ${settled + 1}`, display: true }, { triggerTurn: true });
      }
    });
  };
}

test("a goal-like loop of N settled runs reports completion once (not N times), merged", async (t) => {
  const rounds = 3;
  const r = await rig(t, { extensions: [goalLoop(rounds)] });
  r.pi.script([ai.fauxAssistantMessage("round one answer"), ai.fauxAssistantMessage("round two answer"), ai.fauxAssistantMessage("final answer")]);
  await r.pi.prompt("reach the goal");
  await r.flush();
  assert.equal(r.pi.modelCalls.length, rounds, "all rounds ran");
  const types = r.types().filter((type) => type.startsWith("run."));
  assert.deepEqual(types, ["run.started", "run.completed"], "one start, one completion for the whole unit");
  const completed = only(r.listener!.events, "run.completed");
  assert.equal(completed.payload.answer, "final answer", "the last answer");
  assert.equal(completed.payload.had_response, true);
  assert.equal(completed.payload.run_id, only(r.listener!.events, "run.started").payload.run_id);
});

test("the held completion is released after the last round (never held forever)", async (t) => {
  const r = await rig(t, { extensions: [goalLoop(2)] });
  r.pi.script([ai.fauxAssistantMessage("first"), ai.fauxAssistantMessage("second")]);
  await r.pi.prompt("two rounds");
  await r.flush();
  assert.equal(r.types().at(-1), "run.completed");
  // A second unit after the release is a new run with its own completion.
  r.pi.script([ai.fauxAssistantMessage("again"), ai.fauxAssistantMessage("again 2")]);
  await r.pi.prompt("more");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.completed", "run.started", "run.completed"]);
  const [first, second] = r.listener!.events.filter((e) => e.type === "run.completed");
  assert.notEqual(first!.payload.run_id, second!.payload.run_id);
});

test("a compaction started from agent_settled does not hold the completion", { timeout: 60_000 }, async (t) => {
  const compacted = latch();
  const compactor = (pi: ExtensionAPI) => {
    pi.on("agent_settled", (_event, ctx) => ctx.compact({ onComplete: compacted.signal, onError: compacted.signal }));
  };
  const r = await rig(t, { extensions: [compactor] });
  r.pi.script([ai.fauxAssistantMessage("worked"), ai.fauxAssistantMessage("summary of the session")]);
  await r.pi.prompt("do it");
  await compacted.promise;
  // Resolves only once the completion reached the app; a completion held forever times the test out.
  await r.listener!.waitFor((events) => events.some((e) => e.type === "run.completed"));
  assert.deepEqual(r.types(), ["run.started", "run.completed"]);
});

test("interrupting a later round of the loop cancels the unit once, with no completion", async (t) => {
  const r = await rig(t, { extensions: [goalLoop(3)] });
  const streaming = latch();
  r.pi.script([ai.fauxAssistantMessage("first round"), waitForAbortStep(streaming.signal)]);
  const run = r.pi.prompt("loop");
  await streaming.promise;
  await r.pi.session.abort();
  await run;
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.cancelled"]);
});

test("the payload is a whitelist: no tool output, no file contents, no history; long texts are cut with …", async (t) => {
  const gated = gatedTool("lookup", "parallel");
  const r = await rig(t, { pi: { tools: [gated.tool] } });
  writeFileSync(join(r.pi.cwd, "secret.txt"), "TOP-SECRET-FILE-CONTENT\n");
  const longReply = "答".repeat(3000);
  const longPrompt = "问".repeat(800);
  r.pi.script([
    ai.fauxAssistantMessage([ai.fauxToolCall("read", { path: "secret.txt" }, { id: "call-read" }), ai.fauxToolCall("lookup", { key: "k" }, { id: "call-k" })], {
      stopReason: "toolUse",
    }),
    ai.fauxAssistantMessage(longReply),
  ]);
  const run = r.pi.prompt(longPrompt);
  await gated.running("k");
  gated.open("k");
  await run;
  await r.flush();
  const toolResults = r.pi.session.state.messages.filter((m) => m.role === "toolResult");
  assert.match(JSON.stringify(toolResults), /TOP-SECRET-FILE-CONTENT/, "the read tool really read the file");
  const completedTools = r.listener!.events.filter((e) => e.type === "tool.completed");
  assert.deepEqual(
    completedTools.map((e) => e.payload.ok),
    [true, true],
  );
  // The raw bodies, before any schema could drop a leaked key.
  const wire = r.listener!.bodies.join("\n");
  assert.equal(r.listener!.bodies.length, 6);
  for (const leak of [/TOP-SECRET-FILE-CONTENT/, /SECRET TOOL OUTPUT/, /secret\.txt/, /"key"/, /"messages"/, /"content"/, /答{501}/, /问{501}/]) {
    assert.doesNotMatch(wire, leak);
  }
  for (const [index, body] of r.listener!.bodies.entries()) {
    assert.deepEqual(JSON.parse(body), r.listener!.events[index], "no key beyond the whitelist was sent");
  }
  assert.equal(only(r.listener!.events, "run.started").payload.prompt, `${"问".repeat(500)}…`);
  assert.equal(only(r.listener!.events, "run.completed").payload.answer, `${"答".repeat(500)}…`);
});

test("each event can be switched off on its own", async (t) => {
  const gated = gatedTool("step", "parallel");
  const events = { ...DEFAULT_CONFIG.sink.events, "tool.started": false, "run.started": false };
  const r = await rig(t, { sink: { events }, pi: { tools: [gated.tool] } });
  r.pi.script([toolCalls("step", ["a"]), ai.fauxAssistantMessage("ok")]);
  const run = r.pi.prompt("go");
  await gated.running("a");
  gated.open("a");
  await run;
  await r.flush();
  assert.deepEqual(r.types(), ["tool.completed", "run.completed"]);
});

test("installing again on the same Pi replaces the sink instead of doubling every event", async (t) => {
  const r = await rig(t, { installTwice: true });
  r.pi.script([ai.fauxAssistantMessage("once")]);
  await r.pi.prompt("go");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.completed"]);
});

test("when disabled nothing is installed: no listener, no queue, no token file, no connection", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-sink-off-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const socket = join(dir, "notify.sock");
  const listener = await startSinkListener({ socket, token: "t".repeat(64) });
  t.after(() => listener.close());
  const tokenFile = join(dir, "absent", "notify.token");
  const subscribed: string[] = [];
  let installed: InstalledSink | undefined | "not called" = "not called";
  const pi = await startPi({
    extension: false,
    extensions: [
      (api) => {
        // The real ExtensionAPI, observed: any subscription made through it is recorded.
        const observed = new Proxy(api, {
          get: (target, key, receiver) =>
            key === "on" ? (event: string, handler: never) => (subscribed.push(event), target.on(event as never, handler)) : Reflect.get(target, key, receiver),
        });
        installed = installSink(observed, { ...DEFAULT_CONFIG.sink, enabled: false, socket, tokenFile });
      },
    ],
  });
  t.after(() => pi.dispose());
  pi.script([ai.fauxAssistantMessage("hi")]);
  await pi.prompt("hello");
  assert.equal(installed, undefined);
  assert.deepEqual(subscribed, []);
  assert.equal(existsSync(tokenFile), false);
  assert.equal(listener.connections, 0);
});

test("a subagent session (headless, no session file) is suppressed", async (t) => {
  const r = await rig(t, { pi: { mode: "json", persist: false } });
  r.pi.script([ai.fauxAssistantMessage("sub result")]);
  await r.pi.prompt("subtask");
  await r.flush();
  assert.equal(r.listener!.connections, 0);
});

test("app absent (no socket): the run is untouched, no error, one debug line at most", async (t) => {
  const gated = gatedTool("step", "parallel");
  const r = await rig(t, { listener: false, pi: { tools: [gated.tool] } });
  for (const key of ["a", "b"]) {
    r.pi.script([toolCalls("step", [key]), ai.fauxAssistantMessage(`done ${key}`)]);
    const run = r.pi.prompt(`job ${key}`);
    await gated.running(key);
    gated.open(key);
    await run;
    await r.flush();
  }
  assert.equal(r.pi.session.state.messages.at(-1)?.role, "assistant");
  assert.deepEqual(r.pi.extensionErrors, []);
  assert.deepEqual(r.pi.notices(), []);
  assert.equal(r.debugLines.length, 1);
  assert.match(r.debugLines[0]!, /ENOENT/);
  assert.equal(r.sink!.queue.size, 0);
});

test("a dead app (stale socket file, nobody listening): no error, one debug line", async (t) => {
  const r = await rig(t, { listener: false });
  writeFileSync(r.config.socket, "");
  for (const n of [1, 2]) {
    r.pi.script([ai.fauxAssistantMessage(`answer ${n}`)]);
    await r.pi.prompt(`question ${n}`);
    await r.flush();
  }
  assert.deepEqual(r.pi.extensionErrors, []);
  assert.deepEqual(r.pi.notices(), []);
  assert.equal(r.debugLines.length, 1);
  // A plain file at the socket path is refused before any connection (and before the token is sent).
  assert.match(r.debugLines[0]!, /not a socket .*token not sent/);
});

test("a refusing app (401) costs nothing but one debug line; a token the app rewrote is picked up", async (t) => {
  const r = await rig(t, { listener: { token: "the-app-uses-another-token" } });
  r.pi.script([ai.fauxAssistantMessage("one")]);
  await r.pi.prompt("first");
  await r.flush();
  assert.deepEqual(r.listener!.events, []);
  assert.ok(r.listener!.rejected.length >= 2 && r.listener!.rejected.every((x) => x.status === 401));
  assert.equal(r.debugLines.length, 1);
  assert.match(r.debugLines[0]!, /HTTP 401/);
  assert.deepEqual(r.pi.extensionErrors, []);
  // The app (re)creates the shared file with its token: the next event is read with it.
  writeFileSync(r.config.tokenFile, "the-app-uses-another-token\n");
  r.pi.script([ai.fauxAssistantMessage("two")]);
  await r.pi.prompt("second");
  await r.flush();
  assert.deepEqual(r.types(), ["run.started", "run.completed"]);
});

test("a hung app (never answers) does not hold the run; the queue overflows oldest-first; quitting gives up", async (t) => {
  const r = await rig(t, { listener: { answerDelayMs: Infinity }, pi: { tools: [echoTool("quick")] } });
  const calls = 140; // 280 tool events: more than the queue holds while the app hangs on the first
  r.pi.script([
    ai.fauxAssistantMessage(
      Array.from({ length: calls }, (_, n) => ai.fauxToolCall("quick", {}, { id: `q${n}` })),
      { stopReason: "toolUse" },
    ),
    ai.fauxAssistantMessage("all quick calls done"),
  ]);
  await r.pi.prompt("many tools");
  for (let n = 0; n < 2; n++) {
    r.pi.script([ai.fauxAssistantMessage(`answer ${n}`)]);
    await r.pi.prompt(`question ${n}`);
  }
  assert.equal(r.pi.session.state.messages.filter((m) => m.role === "assistant").length, 4);
  assert.deepEqual(r.pi.extensionErrors, []);
  assert.ok(r.sink!.queue.dropped > 0, "the oldest events were dropped");
  assert.ok(r.sink!.queue.size <= 256);
  await r.sink!.close();
  assert.equal(r.sink!.queue.size, 0, "nothing left queued after quitting");
  assert.ok(r.listener!.events.length >= 1, "the app got the event that was in flight when it hung");
});

test("an absent token file is created 0600 in a new 0700 folder, and the app can then read it", async (t) => {
  const dir = mkdtempSync(join(tmpdir(), "anon-notify-sink-tok-"));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const tokenFile = join(dir, "VPet", "notify.token");
  const socket = join(dir, "notify.sock");
  let sink: InstalledSink | undefined;
  const pi = await startPi({
    extension: false,
    extensions: [(api) => void (sink = installSink(api, { ...DEFAULT_CONFIG.sink, enabled: true, socket, tokenFile }))],
  });
  t.after(() => pi.dispose());
  assert.ok(sink);
  assert.equal(statSync(tokenFile).mode & 0o777, 0o600);
  assert.equal(statSync(join(dir, "VPet")).mode & 0o777, 0o700);
  const token = readFileSync(tokenFile, "utf8").trim();
  assert.match(token, /^[0-9a-f]{64}$/);
  const listener = await startSinkListener({ socket, token: ensureSinkToken(tokenFile) });
  t.after(() => listener.close());
  pi.script([ai.fauxAssistantMessage("hello app")]);
  await pi.prompt("hi");
  await sink!.flush();
  assert.deepEqual(
    listener.events.map((e) => e.type),
    ["run.started", "run.completed"],
  );
});

test("quitting mid-run tells the app the run was cancelled", async (t) => {
  const r = await rig(t);
  const streaming = latch();
  r.pi.script([waitForAbortStep(streaming.signal)]);
  const run = r.pi.prompt("never finishes");
  await streaming.promise;
  await r.sink!.close();
  await r.pi.session.abort();
  await run;
  assert.deepEqual(r.types(), ["run.started", "run.cancelled"]);
});
