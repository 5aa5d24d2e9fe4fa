/** The approval policy's pure decisions, table by table. */
import { test } from "node:test";
import assert from "node:assert/strict";
import { argsDigest, canonicalJson, decideGate, matchCall, outsideProject, personPresent, type PolicySettings } from "../../extension/approvals/policy.ts";
import { simpleCommands } from "../../extension/approvals/shell.ts";
import { redactSecrets } from "../../common/redact.ts";

const place = { cwd: "/home/u/proj", home: "/home/u", tempDirs: ["/tmp"] };
const defaults: PolicySettings = { disabledRules: [], rules: [], grantableRules: [] };
const bash = (command: string) => ({ tool: "bash", input: { command } });

test("bash command lines: which rule each one matches", () => {
  const table: [string, string | undefined][] = [
    ["rm -rf build", "rm-rf"],
    ["rm -fr build", "rm-rf"],
    ["rm -r -f build", "rm-rf"],
    ["rm -Rf build", "rm-rf"],
    ["rm --recursive --force build", "rm-rf"],
    ["/bin/rm -rf /", "rm-rf"],
    ["\\rm -rf x", "rm-rf"],
    ["echo hi; rm -rf build", "rm-rf"],
    ["make && rm -rf dist || true", "rm-rf"],
    ["FOO=1 env -u X nohup rm -rf x", "rm-rf"],
    ["bash -c 'cd src && rm -rf gen'", "rm-rf"],
    ["sh -lc \"rm -rf x\"", "rm-rf"],
    ["echo $(rm -rf x)", "rm-rf"],
    ["echo `rm -rf x`", "rm-rf"],
    ["eval rm -rf x", "rm-rf"],
    ["rm -r build", undefined],
    ["rm -f file.txt", undefined],
    ["echo 'rm -rf x'", undefined],
    ["grep -rf patterns.txt .", undefined],
    ["# rm -rf x", undefined],
    ["sudo apt install x", "sudo"],
    ["doas reboot", "sudo"],
    ["git push --force origin main", "git-push-force"],
    ["git push -f", "git-push-force"],
    ["git push --force-with-lease", "git-push-force"],
    ["git -C repo push origin +main", "git-push-force"],
    ["git push origin :old-branch", "git-push-force"],
    ["git push origin main", undefined],
    ["git push -u origin feature", undefined],
    ["git reset --hard HEAD~1", "git-reset-hard"],
    ["git reset --soft HEAD~1", undefined],
    ["git clean -fdx", "git-clean"],
    ["git clean -n", undefined],
    ["dd if=x of=/dev/sda", "disk-write"],
    ["dd if=/dev/zero of=/dev/null count=1", undefined],
    ["mkfs.ext4 /dev/sdb1", "disk-write"],
    ["echo x > /etc/hosts", "write-outside-project"],
    ["echo x >> ~/.bashrc", "write-outside-project"],
    ["echo x > ../sibling/file", "write-outside-project"],
    ["echo x 2> /var/log/x", "write-outside-project"],
    ["cat a | tee /etc/motd", "write-outside-project"],
    ["cp build/app /usr/local/bin/app", "write-outside-project"],
    ["echo x > out.txt", undefined],
    ["echo x > /tmp/scratch", undefined],
    ["make 2>&1 > /dev/null", undefined],
    ["cp a b", undefined],
    ["ls -la", undefined],
  ];
  for (const [command, rule] of table) assert.equal(matchCall(bash(command), place, defaults)?.rule, rule, command);
});

test("file tools: writes outside the project need a person, inside do not", () => {
  const table: [string, Record<string, unknown>, string | undefined][] = [
    ["write", { path: "src/a.ts", content: "" }, undefined],
    ["write", { path: "/home/u/proj/src/a.ts", content: "" }, undefined],
    ["write", { path: "/etc/passwd", content: "" }, "write-outside-project"],
    ["edit", { path: "../other/x.ts", edits: [] }, "write-outside-project"],
    ["edit", { path: "~/.ssh/config", edits: [] }, "write-outside-project"],
    ["write", { path: "/tmp/x", content: "" }, undefined],
    ["read", { path: "/etc/passwd" }, undefined],
  ];
  for (const [tool, input, rule] of table) assert.equal(matchCall({ tool, input }, place, defaults)?.rule, rule, `${tool} ${JSON.stringify(input)}`);
});

test("rules can be switched off by id, and user rules match tool names and command patterns", () => {
  const settings: PolicySettings = {
    disabledRules: ["rm-rf"],
    grantableRules: [],
    rules: [
      { id: "deploy", tool: "bash", command: "\\bkubectl\\s+(apply|delete)\\b", label: "kubectl" },
      { id: "any-mcp", tool: "mcp_call" },
    ],
  };
  assert.equal(matchCall(bash("rm -rf build"), place, settings), undefined, "a disabled built-in rule no longer asks");
  assert.deepEqual(matchCall(bash("kubectl delete pod x"), place, settings), { rule: "deploy", action: "kubectl" });
  assert.equal(matchCall(bash("kubectl get pods"), place, settings), undefined);
  assert.equal(matchCall({ tool: "mcp_call", input: {} }, place, settings)?.rule, "any-mcp");
  assert.equal(matchCall({ tool: "other", input: {} }, place, settings), undefined);
  assert.equal(matchCall({ tool: "write", input: { command: "kubectl apply" } }, place, settings), undefined, "a command pattern needs a command tool");
});

test("who can answer, and what the gate does", () => {
  const person: [Parameters<typeof personPresent>[0], boolean][] = [
    [{ mode: "tui", hasUI: true, active: false, subagent: false }, true],
    [{ mode: "rpc", hasUI: true, active: true, subagent: false }, true],
    [{ mode: undefined, hasUI: false, active: true, subagent: false }, true],
    [{ mode: undefined, hasUI: false, active: false, subagent: false }, false],
    [{ mode: "print", hasUI: false, active: true, subagent: false }, false],
    [{ mode: "json", hasUI: false, active: true, subagent: false }, false],
    [{ mode: "tui", hasUI: true, active: true, subagent: true }, false],
  ];
  for (const [facts, present] of person) assert.equal(personPresent(facts), present, JSON.stringify(facts));

  const match = { rule: "rm-rf", action: "rm -rf" };
  assert.deepEqual(decideGate(undefined, false, "reject"), { kind: "allow" });
  assert.deepEqual(decideGate(match, true, "reject"), { kind: "ask", match });
  assert.deepEqual(decideGate(match, false, "allow"), { kind: "allow" });
  assert.deepEqual(decideGate(match, false, "reject"), { kind: "block", match });
});

test("the binding digest is the canonical JSON's: key order never matters, values do", () => {
  assert.equal(canonicalJson({ b: 1, a: [{ d: 2, c: null }], e: undefined }), '{"a":[{"c":null,"d":2}],"b":1}');
  assert.equal(argsDigest({ command: "rm -rf build", timeout: 5 }), argsDigest({ timeout: 5, command: "rm -rf build" }));
  assert.notEqual(argsDigest({ command: "rm -rf build" }), argsDigest({ command: "rm -rf build " }));
  assert.match(argsDigest({}), /^[0-9a-f]{64}$/);
});

test("helpers: nested commands are found, paths resolve against the project, secrets leave previews", () => {
  assert.deepEqual(
    simpleCommands("A=1 bash -c 'echo $(whoami)'").map((c) => c.argv[0]),
    ["bash", "echo", "whoami"],
  );
  assert.equal(outsideProject("./a/../b", place), false);
  assert.equal(outsideProject("$HOME/x", place), true, "an unresolvable target counts as outside");
  const table: [string, string][] = [
    ["curl -H 'Authorization: Bearer abcdefghijklmnop' x", "curl -H 'Authorization: Bearer ***' x"],
    ["TOKEN=s3cr3tvalue make deploy", "TOKEN=*** make deploy"],
    ["mysql --password hunter22 db", "mysql --password *** db"],
    ["git clone https://me:pat123@github.com/x/y", "git clone https://me:***@github.com/x/y"],
    ["export OPENAI_API_KEY=sk-abcdefghijklmnopqrstuv", "export OPENAI_API_KEY=***"],
    ["echo ghp_abcdefghijklmnopqrstuvwxyz0123", "echo ***"],
    ["rm -rf build", "rm -rf build"],
  ];
  for (const [text, redacted] of table) assert.equal(redactSecrets(text), redacted, text);
});
