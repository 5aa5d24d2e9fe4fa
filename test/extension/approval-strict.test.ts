/** Strict mode's decision, table by table: what runs without a person, and what asks (both directions). */
import { test } from "node:test";
import assert from "node:assert/strict";
import { literalArgv } from "../../extension/approvals/argv-rules.ts";
import { matchCall, type PolicySettings } from "../../extension/approvals/policy-rules.ts";
import { analyzeCommand } from "../../extension/approvals/command-rules.ts";
import { loadShell } from "../../extension/approvals/shell-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";
import { Config, DEFAULT_CONFIG } from "../../extension/config/schema-rules.ts";

const words = messagesFor("en-US").approvals.actions;
const read = await loadShell();
const place = { cwd: "/home/u/proj", home: "/home/u", tempDirs: ["/tmp"], roots: ["/home/u/.local/anon-data"] };
const strict: PolicySettings = { mode: "strict", allow: [], disabledRules: [], rules: [], grantableRules: [] };
const rules: PolicySettings = { ...strict, mode: "rules" };
const asks = (command: string, settings = strict) => matchCall({ tool: "bash", input: { command } }, place, settings, read, words) !== undefined;

const SAFE = [
  "ls",
  "ls -la src",
  "cat README.md package.json",
  "head -n 20 src/index.ts | tail -5",
  "wc -l src/*.ts",
  "rg -n 'TODO' src",
  "rg --type ts foo",
  "grep -rn 'fixme' test",
  "pwd",
  "which node",
  "echo hello",
  'echo "$HOME" $PATH',
  "echo $(git rev-parse --show-toplevel)",
  "printf '%s\\n' a b",
  "file README.md",
  "stat -c %s package.json",
  "du -sh node_modules",
  "df -h .",
  "date +%s",
  "env",
  "printenv PATH",
  "true",
  "diff -u a.txt b.txt",
  "sort names.txt | uniq -c",
  "cut -d: -f1 data.txt",
  "tr a-z A-Z < in.txt",
  "basename src/a.ts; dirname src/a.ts",
  "realpath .",
  "tree -L 2 src",
  "find . -name '*.ts' -type f",
  "find src -newer package.json -print",
  "sed -n '1,20p' src/index.ts",
  "sed -n 5p a.txt",
  "sed -n '/start/,/end/p' a.txt",
  "git status",
  "git status --short",
  "git log --oneline -n 10",
  "git diff HEAD~1 -- src",
  "git show HEAD:package.json",
  "git branch",
  "git branch -a -v",
  "git branch --show-current",
  "git rev-parse HEAD",
  "git ls-files src",
  "git blame -L 1,10 README.md",
  "git remote -v",
  "git --no-pager log -1",
  "ls && cat a.txt || echo missing",
  "(cd src && ls)",
  "{ ls; pwd; }",
  "ls > out.txt",
  "git diff > /tmp/patch.diff",
  "cat a.txt 2>/dev/null",
  "ls 2>&1 | head",
  "cat <<'EOF'\nhello $(x)\nEOF",
  "[ -f package.json ] && cat package.json",
  "[[ -d src ]] && ls src",
  "test 1 -eq 1",
  "if [ -f a ]; then cat a; else echo none; fi",
  "for f in a b c; do echo $f; done",
  "X=1 ls",
  "# just a comment",
  "node --version",
  "jq .version package.json",
  "ps aux | grep node",
];

const UNSAFE = [
  // interpreters, build tools, unknown programs
  "npm test",
  "node --version --eval 'x'",
  "node -e x --version",
  "make",
  "python3 -m pytest",
  "python3 -c 'import shutil; shutil.rmtree(\"/home/u\")'",
  'node -e \'require("fs").rmSync("/home/u",{recursive:true})\'',
  "perl -e 'system q(rm -rf ~)'",
  "awk 'BEGIN{system(\"rm -rf ~\")}'",
  "python3 - <<'EOF'\nimport os\nEOF",
  "mytool --run",
  "./script.sh",
  "/usr/bin/ls",
  "rm -rf build",
  "mkdir x",
  // wrappers and tools that run commands
  "env rm -rf ~",
  "env -S 'rm -rf ~'",
  "nice ls",
  "timeout 5 ls",
  "taskset -c 0 rm -rf ~",
  "sudo ls",
  "command ls",
  "builtin echo x",
  "exec ls",
  "xargs rm < list",
  "find . -exec rm {} +",
  "find . -delete",
  "find . -fprint /home/u/.bashrc",
  "find . -name $X",
  "tar --checkpoint-action=exec=sh x.tar",
  "sed 'e rm -rf ~' a",
  "sed -n '1e rm -rf ~' a",
  "sed -n '1,5w out' a",
  "sed -i 's/a/b/' a",
  "sed -n p -i a",
  "sort -o /home/u/.bashrc a",
  "sort --compress-program=sh a",
  "uniq a b",
  "tree -o out a",
  "rg --pre sh x",
  "rg --pre=./x y",
  "date -s 2020-01-01",
  "printf -v 'a[$(rm -rf ~)]' x",
  "printf -v x y",
  "env rm x",
  "git -c core.pager='sh -c x' log",
  "git --exec-path=/tmp log",
  "git --config-env=core.pager=X log",
  "git -C /tmp/evil status",
  "git -p log",
  "git log --output=/home/u/.bashrc",
  "git diff --ext-diff",
  "git diff --textconv",
  "git commit -m x",
  "git push",
  "git rebase -x 'rm -rf ~' HEAD~1",
  "git branch -D main",
  "git branch newbranch",
  "git remote add x y",
  "git grep -O x",
  "cd /tmp/evil && git status",
  // hidden code, expansions in program position
  "$(echo rm) -rf ~",
  "$CMD",
  "x='a[$(rm -rf ~)]'; echo $((x))",
  "echo $((1+2))",
  "((x++))",
  "[[ $x -eq 0 ]]",
  "[[ x -eq 0 ]]",
  "[ x -eq 0 ]",
  "[[ -v 'a[$(rm -rf ~)]' ]]",
  "test -v x",
  "declare -i x=1",
  "export X=1",
  "let x=1",
  'echo "${x@P}"',
  "echo ${!x}",
  "echo ${a[$i]}",
  "echo ${x:0:$n}",
  "mapfile -C cb arr < f",
  "readarray -C cb arr < f",
  "compgen -C 'rm -rf ~' x",
  "eval ls",
  "source x.sh",
  ". x.sh",
  "trap 'rm -rf ~' EXIT",
  "coproc ls",
  "f() { ls; }; f",
  "alias ls='rm -rf ~'",
  "for ((i=0;i<1;i++)); do ls; done",
  "unset x",
  "PATH=/tmp/evil ls",
  "BASH_ENV=x ls",
  "GIT_DIR=/tmp/x git status",
  "IFS=/ ls",
  // writes
  "echo x > /etc/hosts",
  "echo x >> ~/.bashrc",
  "cd ~ && echo x >> .bashrc",
  "cd src && echo x > a.txt",
  "echo x > $OUT",
  "ls > ../outside.txt",
  "echo x | tee /home/u/x",
  "cat < /dev/stdin | sh",
  "echo 'rm -rf ~' > /tmp/x.sh && sh /tmp/x.sh",
  "cat ~/$a$b",
  "cat ~/.ss?/id_rsa",
  "ls ../*",
  "cat /*/x",
  // protected
  "cat ~/.ssh/id_rsa",
  "ls .git/hooks",
  "cat /home/u/.local/anon-data/token",
  "vim -c '!rm -rf ~' x",
  "ssh localhost",
  "at now",
  "crontab x",
  "flock x -c 'rm -rf ~'",
  "strace ls",
  "gdb -ex shell",
  "parallel ::: ls",
  "systemd-run ls",
  "echo ok; rm -rf ~",
  "ls $(rm -rf ~)",
  "ls <(rm -rf ~)",
  "echo `rm -rf ~`",
  "cat <<EOF | sh\nrm -rf ~\nEOF",
  "ls &\nrm -rf ~",
  "ls\nrm -rf ~",
  "ls; $'\\x72\\x6d' -rf ~",
  "l\\s; r''m -rf ~",
];

test("strict mode: known-safe commands run without a person", () => {
  for (const command of SAFE) assert.equal(asks(command), false, command);
});

test("strict mode: anything not proven safe asks", () => {
  for (const command of UNSAFE) assert.equal(asks(command), true, command);
});

test("rules mode is today's: the risky set asks, interpreters and build tools do not", () => {
  const table: [string, boolean][] = [
    ["npm test", false],
    ["python3 -m pytest", false],
    ["mkdir x", false],
    ["rm -rf build", true],
    ["cat ~/.ssh/id_rsa", true],
    ["echo x >> ~/.bashrc", true],
    ["ls", false],
  ];
  for (const [command, expected] of table) assert.equal(asks(command, rules), expected, command);
});

test("the allow list: an exact argv prefix, whose other words stay in the project", () => {
  const allow: PolicySettings = { ...strict, allow: [["npm", "test"], ["git", "commit"], ["npm", "run"], ["make"]] };
  const table: [string, boolean][] = [
    ["npm test", false],
    ["npm test -- --watch=false", false],
    ["npm run build", false],
    ["git commit -m 'fix: x'", false],
    ["make -j2 all", false],
    ["npm test && git status", false],
    ["npm testing", true],
    ["npm install", true],
    ["npm test ../other", true],
    ["npm test /etc/passwd", true],
    ["npm test ~/x", true],
    ["npm test --prefix=/", true],
    ["npm test $X", true],
    ["env npm test", true],
    ["npm test; rm -rf ~", true],
    ["make -C /", true],
    ["git commit --amend --no-edit; git push --force", true],
    ["git commit -m x > ~/.bashrc", true],
    ["'npm' test", false],
  ];
  for (const [command, expected] of table) assert.equal(asks(command, allow), expected, command);
  // A destructive rule still asks under an allowed prefix.
  assert.equal(asks("git push --force", { ...strict, allow: [["git", "push"]] }), true);
});

test("protected paths ask in every mode and for every tool that takes a path", () => {
  const table: [string, Record<string, unknown>][] = [
    ["read", { path: "~/.ssh/id_ed25519" }],
    ["read", { path: "/home/u/.bashrc" }],
    ["write", { path: ".git/hooks/pre-commit", content: "x" }],
    ["edit", { path: "/home/u/proj/.git/config" }],
    ["write", { path: "../../.profile" }],
    ["read", { path: "/home/u/.pi/agent/settings.json" }],
    ["grep", { pattern: "x", path: "/home/u/.local/anon-data" }],
    ["bash", { command: "cat ~/.s''sh/id_rsa" }],
    ["bash", { command: "cp x ~/.zshrc" }],
    ["bash", { command: "cat ~/.aws/credentials" }],
    ["write", { path: ".npmrc", content: "script-shell=/tmp/x" }],
    ["read", { path: "/home/u/.netrc" }],
  ];
  for (const settings of [strict, rules])
    for (const [tool, input] of table) {
      const match = matchCall({ tool, input }, place, settings, read, words);
      assert.ok(match?.rules.includes("protected-path"), `${settings.mode} ${tool} ${JSON.stringify(input)}`);
    }
  assert.equal(matchCall({ tool: "read", input: { path: "src/index.ts" } }, place, strict, read, words), undefined);
});

test("every rule matched is listed with where it matched", () => {
  const match = matchCall({ tool: "bash", input: { command: "rm -rf build; echo ok; npm test" } }, place, strict, read, words);
  assert.deepEqual(match?.sites, [
    { rule: "rm-rf", at: "rm -rf build" },
    { rule: "strict.unlisted", at: "rm -rf build" },
    { rule: "strict.unlisted", at: "npm test" },
  ]);
});

test("argv: the literal words of every simple command, only when all resolved", () => {
  const argvOf = (command: string) => literalArgv(analyzeCommand(command, read));
  assert.deepEqual(argvOf("rm -rf build"), [["rm", "-rf", "build"]]);
  assert.deepEqual(argvOf("rm -rf 'my dir' && git status | head"), [["rm", "-rf", "my dir"], ["git", "status"], ["head"]]);
  for (const command of [
    "rm -rf $X",
    "X=1 rm x",
    "rm x > out",
    "bash -c 'rm x'",
    "env rm x",
    "find . -exec rm {} +",
    "echo $(ls)",
    "f() { :; }",
    "rm *.o",
    "cat <<EOF\nx\nEOF",
    "[[ -f x ]]",
  ])
    assert.equal(argvOf(command), undefined, command);
});

test("config: mode and allow are validated with clear errors", () => {
  const approval = (value: object) => Config.shape.approval.safeParse({ ...DEFAULT_CONFIG.approval, ...value });
  assert.equal(DEFAULT_CONFIG.approval.mode, "strict");
  assert.ok(approval({ mode: "rules", allow: [["npm", "test"]] }).success);
  for (const bad of [
    { mode: "loose" },
    { allow: [[]] },
    { allow: [["npm", "*"]] },
    { allow: [["/usr/bin/npm"]] },
    { allow: ["npm test"] },
    { allow: [["npm", ""]] },
  ])
    assert.equal(approval(bad).success, false, JSON.stringify(bad));
  const error = approval({ allow: [["npm", "te*"]] });
  assert.match(JSON.stringify(error.error?.issues), /exact words/);
});
