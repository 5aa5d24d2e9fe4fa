/** The doctor's warning when this machine's server keeps its operator token where Pi's user can read it. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { doctorReport, readableOperatorTokens, type DoctorFacts } from "../../extension/session/doctor.ts";
import { messagesFor } from "../../extension/texts/messages.ts";

test("a standalone's data/operator.token beside the project, or the one the environment names, is found when readable", (t) => {
  const root = mkdtempSync(join(tmpdir(), "anon-operator-"));
  t.after(() => rmSync(root, { recursive: true, force: true }));
  assert.deepEqual(readableOperatorTokens(root, {}), [], "no server here");
  mkdirSync(join(root, "data"));
  writeFileSync(join(root, "data", "operator.token"), "x", { mode: 0o600 });
  writeFileSync(join(root, "other.token"), "y", { mode: 0o600 });
  assert.deepEqual(readableOperatorTokens(root, { ANON_NOTIFY_OPERATOR_TOKEN_FILE: join(root, "other.token") }), [
    join(root, "data", "operator.token"),
    join(root, "other.token"),
  ]);
});

test("the report warns in the session's language, naming the file, never its content", () => {
  const facts = {
    configErrors: [],
    files: [],
    values: [],
    token: { used: "file", file: "/a/token", fileState: "present" },
    operatorTokens: ["/srv/anon/data/operator.token"],
    endpoint: "http://127.0.0.1:5140/x",
    health: { kind: "skipped", why: "-" },
    recipient: { kind: "skipped", why: "-" },
    footer: "",
    presence: { running: false, accepted: false, lastFailure: null },
    commands: { enabled: false, running: false, held: null, queued: 0 },
    outbox: { kind: "skipped", why: "-" },
    lastDelivery: undefined,
  } satisfies DoctorFacts;
  assert.match(
    doctorReport(messagesFor("en-US"), facts),
    /warning: the server's operator token \/srv\/anon\/data\/operator\.token is readable by the user Pi runs as/,
  );
  assert.match(doctorReport(messagesFor("zh-CN"), facts), /警告：服务端的运维令牌 \/srv\/anon\/data\/operator\.token 能被 Pi 运行所用的用户读到/);
  assert.doesNotMatch(doctorReport(messagesFor("en-US"), { ...facts, operatorTokens: [] }), /operator token/);
});
