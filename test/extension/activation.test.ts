/**
 * Per-session activation in a REAL Pi runtime (SDK + faux model) with a real webhook on loopback:
 * the JSONL record, restore on reload and resume, fork/clone inheritance, fail-closed records,
 * the pre-enable recipient check, subagents, and the dormant projection Pi Web reads.
 */
import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";
import { existsSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dataDirFor } from "../../extension/config/config.ts";
import { ACTIVATION_CUSTOM_TYPE, isSubagent, readActivation, readDormantActivation } from "../../activation.ts";
import { STATUS_KEY } from "../../protocol/state-bus.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { ai, makeRoot, startPi, type PiHarness, type StartPiOptions } from "../../harness/pi.ts";
import { probe, type Probe } from "../helpers/probe.ts";
import { TEST_ANON_QQ, TEST_QQ, configureExtension, startWebhook, type Webhook } from "../../harness/webhook.ts";

interface Setup {
  pi: PiHarness;
  webhook: Webhook;
  probe: Probe;
  root: string;
  /** Starts a second runtime on the same root (resume), with its own probe. */
  reopen(options?: StartPiOptions): Promise<{ pi: PiHarness; probe: Probe }>;
}

async function setup(t: TestContext, options: StartPiOptions = {}, configOverrides: Record<string, unknown> = {}): Promise<Setup> {
  const webhook = await startWebhook();
  const root = makeRoot();
  configureExtension(root, webhook.endpoint, configOverrides);
  const runtimes: PiHarness[] = [];
  const open = async (more: StartPiOptions) => {
    const observer = probe();
    const pi = await startPi({ root, ...options, ...more, extensions: [observer.extension] });
    runtimes.push(pi);
    return { pi, probe: observer };
  };
  const first = await open({});
  t.after(async () => {
    for (const pi of runtimes) await pi.dispose({ keepRoot: true }).catch(() => undefined);
    await webhook.close();
    rmSync(root, { recursive: true, force: true });
  });
  return { ...first, webhook, root, reopen: (more = {}) => open(more) };
}

function activationLines(file: string): unknown[] {
  return readFileSync(file, "utf8")
    .trim()
    .split("\n")
    .map((line) => JSON.parse(line))
    .filter((entry) => entry.type === "custom" && entry.customType === ACTIVATION_CUSTOM_TYPE)
    .map((entry) => entry.data);
}

async function reply(pi: PiHarness, prompt: string, text = "done") {
  pi.script([ai.fauxAssistantMessage(text)]);
  await pi.prompt(prompt);
}

test("a new session is inactive; the bare command toggles and writes a version 1 record each time", async (t) => {
  const { pi, probe } = await setup(t);
  assert.equal(probe.last()?.status, "inactive");
  assert.equal(probe.last()?.sessionActive, false);

  await pi.prompt("/anon-notify");
  assert.deepEqual(probe.last(), {
    version: 1,
    sessionId: pi.session.sessionManager.getSessionId(),
    status: "active",
    sessionActive: true,
    servicesEnabled: true,
    tokenConfigured: true,
  });
  assert.equal(pi.statusText(STATUS_KEY), `Anon 通知：已开启 → QQ ${TEST_QQ}（目标可达）`);
  await reply(pi, "first");
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.sessionActive, false);
  assert.equal(pi.statusText(STATUS_KEY), "Anon 通知：未开启");

  const file = pi.sessionFile();
  assert.ok(file);
  assert.deepEqual(activationLines(file), [
    { version: 1, active: true, via: "command" },
    { version: 1, active: false, via: "command" },
  ]);
});

test("any argument changes nothing and shows the usage", async (t) => {
  const { pi, probe } = await setup(t);
  const before = probe.states.length;
  await pi.prompt("/anon-notify on");
  await pi.prompt("/anon-notify status");
  assert.equal(probe.states.length, before, "no state change was published");
  const usage = messagesFor("zh-CN").toggle.usage;
  assert.deepEqual(pi.notices().slice(-2), [usage, usage]);
  assert.equal(readActivation(pi.session.sessionManager.getEntries()).record, "none");
});

test("activation set before the first reply reaches the file with that reply and survives a resume", async (t) => {
  const { pi, reopen } = await setup(t);
  await pi.prompt("/anon-notify");
  const file = pi.sessionFile();
  assert.ok(file);
  await reply(pi, "hello");
  assert.ok(existsSync(file), "the first reply writes the session file");
  assert.deepEqual(activationLines(file), [{ version: 1, active: true, via: "command" }]);
  await pi.dispose({ keepRoot: true });

  const resumed = await reopen({ sessionFile: file });
  assert.equal(resumed.probe.last()?.status, "active");
});

test("restore after reload and after resume uses the newest record", async (t) => {
  const { pi, probe, reopen } = await setup(t);
  await pi.prompt("/anon-notify");
  await reply(pi, "one");
  await pi.session.reload();
  assert.equal(probe.last()?.status, "active", "reload restores active");
  await pi.prompt("/anon-notify");
  await pi.session.reload();
  assert.equal(probe.last()?.status, "inactive", "reload restores the newer inactive record");
  await pi.prompt("/anon-notify");
  const file = pi.sessionFile()!;
  await pi.dispose({ keepRoot: true });
  const resumed = await reopen({ sessionFile: file });
  assert.equal(resumed.probe.last()?.status, "active");
});

test("a fork inherits the source's current value, writes a snapshot, and then toggles independently", async (t) => {
  const { pi, probe } = await setup(t);
  await pi.prompt("/anon-notify");
  await reply(pi, "one");
  await reply(pi, "two");
  // Switched off after the fork point: the fork must see this, not the copied active record.
  await pi.prompt("/anon-notify");
  const parentFile = pi.sessionFile()!;
  const secondUser = pi.session.sessionManager.getEntries().filter((e) => e.type === "message" && e.message.role === "user")[1]!;
  await pi.runtime.fork(secondUser.id, { position: "before" });
  const childFile = pi.sessionFile()!;
  assert.notEqual(childFile, parentFile);
  assert.equal(probe.last()?.status, "inactive");
  assert.deepEqual(activationLines(childFile).at(-1), { version: 1, active: false, via: "inherit" });

  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "active");
  assert.equal(
    readActivation(activationLines(parentFile).map((data) => ({ type: "custom", customType: ACTIVATION_CUSTOM_TYPE, data }))).active,
    false,
    "the parent stays off",
  );
});

test("a clone of an active session starts active with an inheritance snapshot", async (t) => {
  const { pi, probe } = await setup(t);
  await pi.prompt("/anon-notify");
  await reply(pi, "one");
  const leaf = pi.session.sessionManager.getLeafId()!;
  await pi.runtime.fork(leaf, { position: "at" });
  assert.equal(probe.last()?.status, "active");
  assert.deepEqual(activationLines(pi.sessionFile()!).at(-1), { version: 1, active: true, via: "inherit" });
});

test("/tree navigation does not change activation", async (t) => {
  const { pi, probe } = await setup(t);
  await reply(pi, "one");
  const firstUser = pi.session.sessionManager.getEntries().find((e) => e.type === "message" && e.message.role === "user")!;
  await pi.prompt("/anon-notify");
  await pi.session.navigateTree(firstUser.id);
  await pi.session.reload();
  assert.equal(probe.last()?.status, "active", "the record is off the current branch but still the newest");
});

for (const [name, data] of [
  ["an unknown version", { version: 2, active: true, via: "command" }],
  ["a non-boolean value", { version: 1, active: "yes", via: "command" }],
  ["no data", undefined],
] as const) {
  test(`a newest record with ${name} fails closed, never falling back to an older active one`, async (t) => {
    const { pi, probe } = await setup(t);
    await pi.prompt("/anon-notify");
    await reply(pi, "one");
    probe.appendActivation(data);
    await pi.session.reload();
    assert.equal(probe.last()?.status, "inactive");
    assert.match(pi.notices().at(-1) ?? "", /记录无效/);
  });
}

test("a failed write claims no change", async (t) => {
  const { pi, probe, root } = await setup(t);
  await reply(pi, "one");
  rmSync(`${root}/sessions`, { recursive: true, force: true });
  const before = probe.states.length;
  await pi.prompt("/anon-notify");
  assert.equal(probe.states.length, before, "no state change was published");
  assert.match(pi.notices().at(-1) ?? "", /无法写入会话文件，Anon 通知状态未改变/);
  assert.equal(pi.statusText(STATUS_KEY), "Anon 通知：未开启");
  // Pi 0.87.1 keeps a failed entry in memory: a reload must still not find the unwritten state.
  await pi.session.reload();
  assert.equal(probe.last()?.status, "inactive");
});

test("enabling is refused with guidance naming both QQ numbers when the server says not_added or unreachable", async (t) => {
  const { pi, probe, webhook } = await setup(t);
  for (const status of ["not_added", "unreachable"] as const) {
    webhook.recipientStatus = status;
    await pi.prompt("/anon-notify");
    const notice = pi.notices().at(-1) ?? "";
    assert.ok(notice.includes(TEST_QQ) && notice.includes(TEST_ANON_QQ), notice);
    assert.equal(probe.last()?.status, "inactive");
  }
  assert.equal(readActivation(pi.session.sessionManager.getEntries()).record, "none", "nothing was written");
});

test("enabling with status unknown warns; with the server unreachable it enables as unverified", async (t) => {
  const { pi, probe, webhook } = await setup(t);
  webhook.recipientStatus = "unknown";
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "active");
  assert.ok(
    pi.notices().some((n) => n.includes("无法可靠检查") && n.includes(messagesFor("zh-CN").notesExplained)),
    "the footer's note is explained",
  );
  await pi.prompt("/anon-notify");
  await webhook.close();
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "active");
  assert.match(pi.statusText(STATUS_KEY) ?? "", /状态未核验/);
});

test("enabling is refused without valid QQ numbers in the configuration", async (t) => {
  const { pi, probe } = await setup(t, {}, { recipient: { qq: "", anonQq: TEST_ANON_QQ } });
  await pi.prompt("/anon-notify");
  assert.match(pi.notices().at(-1) ?? "", /未配置目标 QQ/);
  assert.equal(probe.last()?.status, "inactive");
});

test("an invalid configuration keeps the extension inactive and says which key is wrong", async (t) => {
  const { pi, probe } = await setup(t, {}, { delivery: { maxAttempts: "three" } });
  assert.equal(probe.last()?.status, "misconfigured");
  assert.ok(pi.notices().some((n) => n.includes("delivery.maxAttempts")));
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "misconfigured");
});

test("with a config broken after switching on, the footer keeps the saved state and /anon-notify changes nothing but shows file and key", async (t) => {
  const { pi, probe, root } = await setup(t);
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "active");
  const userConfig = join(dataDirFor(join(root, "agent")), "config.json");
  writeFileSync(userConfig, JSON.stringify({ ...JSON.parse(readFileSync(userConfig, "utf8")), delivery: { maxAttempts: "three" } }));
  await pi.session.reload();
  assert.deepEqual([probe.last()?.status, probe.last()?.sessionActive], ["misconfigured", true]);
  assert.equal(pi.statusText(STATUS_KEY), "Anon 通知：已开启（配置无效，未生效）");

  const published = probe.states.length;
  await pi.prompt("/anon-notify");
  const notice = pi.notices().at(-1) ?? "";
  assert.ok(notice.includes(userConfig) && notice.includes("delivery.maxAttempts") && notice.includes("状态未改变"), notice);
  assert.equal(probe.states.length, published, "no state change was published");
  assert.deepEqual(
    readActivation(pi.session.sessionManager.getEntries()),
    { record: "valid", active: true, via: "command" },
    "the saved switch was not touched",
  );
  assert.equal(pi.statusText(STATUS_KEY), "Anon 通知：已开启（配置无效，未生效）");
});

test("a JSON-mode session without a session file is a subagent: suppressed and cannot be enabled", async (t) => {
  const { pi, probe } = await setup(t, { mode: "json", persist: false });
  assert.equal(probe.last()?.status, "suppressed");
  await pi.prompt("/anon-notify");
  assert.equal(probe.last()?.status, "suppressed");
  assert.equal(readActivation(pi.session.sessionManager.getEntries()).record, "none");
});

test("the opt-out flag suppresses a session even when its record is active", async (t) => {
  const { pi, reopen } = await setup(t);
  await pi.prompt("/anon-notify");
  await reply(pi, "one");
  const file = pi.sessionFile()!;
  await pi.dispose({ keepRoot: true });
  const child = await reopen({ sessionFile: file, flags: { "anon-notify-off": true } });
  assert.equal(child.probe.last()?.status, "suppressed");
  assert.equal(child.probe.last()?.sessionActive, true, "the record is still reported as it is");
  assert.equal(child.probe.last()?.servicesEnabled, false);
});

test("isSubagent: the heuristic, the flag and the environment variable", () => {
  const base = { mode: "rpc", sessionFile: "/s.jsonl", optOutFlag: false, env: {} };
  assert.equal(isSubagent(base, true), false);
  assert.equal(isSubagent({ ...base, mode: "json", sessionFile: undefined }, true), true);
  assert.equal(isSubagent({ ...base, mode: "print", sessionFile: undefined }, true), true);
  assert.equal(isSubagent({ ...base, mode: "print", sessionFile: undefined }, false), false, "mainAgentOnly off");
  assert.equal(isSubagent({ ...base, mode: "print" }, true), false, "print mode with a session file is a main agent");
  assert.equal(isSubagent({ ...base, optOutFlag: true }, false), true);
  assert.equal(isSubagent({ ...base, env: { ANON_NOTIFY_SUBAGENT: "1" } }, false), true);
  assert.equal(isSubagent({ ...base, env: { ANON_NOTIFY_SUBAGENT: "0" } }, true), false);
});

test("the dormant projection reads the stored switch from the session file alone", async (t) => {
  const { pi } = await setup(t);
  await reply(pi, "one");
  const file = pi.sessionFile()!;
  const sessionId = pi.session.sessionManager.getSessionId();
  assert.deepEqual(await readDormantActivation(file), { source: "dormant", sessionId, sessionActive: false, canDisable: false, record: "none" });
  await pi.prompt("/anon-notify");
  assert.deepEqual(await readDormantActivation(file), { source: "dormant", sessionId, sessionActive: true, canDisable: true, record: "valid" });
  await assert.rejects(readDormantActivation(`${file}.missing`), { code: "ENOENT" });
});
