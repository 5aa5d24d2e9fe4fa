/**
 * Properties of the gate over generated commands that mix risky programs with the ways a model can
 * dress them up (expansions, quoting, wrappers, nesting, secret-looking names, line breaks): none
 * is let through without a person, and the preview always shows every program word as written.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import fc from "fast-check";
import { commandPreview, visibleControls } from "../../common/command-text.ts";
import { redactSecrets } from "../../common/redact.ts";
import { APPROVAL_LIMITS } from "../../protocol/approvals.ts";
import { matchCall, type PolicySettings } from "../../extension/approvals/policy-rules.ts";
import { loadShell } from "../../extension/approvals/shell-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";

const words = messagesFor("en-US").approvals.actions;

const read = await loadShell();
const place = { cwd: "/home/u/proj", home: "/home/u", tempDirs: ["/tmp"] };
const settings: PolicySettings = { mode: "rules", allow: [], disabledRules: [], rules: [], grantableRules: [] };

/** A risky call: the program's name and the arguments that make it risky. */
const risky = fc.constantFrom(
  { name: "rm", args: ["-rf", "-r -f", "'-rf'", '"-fr"', "--recursive --force", "-R${X:+}f", "$FLAGS"] },
  { name: "git", args: ["push --force", "push -f", "push origin +main", "reset --hard", "clean -fdx", 'push "$B"'] },
  { name: "sudo", args: ["ls", "-u root id"] },
  { name: "dd", args: ["if=/dev/zero of=/dev/sda", "of=$DISK"] },
  { name: "find", args: [". -delete"] },
  { name: "mkfs.ext4", args: ["/dev/sdb1"] },
);

/** How the program's name is written: some forms the analysis sees through, others it cannot. */
const spelled = (name: string) =>
  fc.constantFrom(
    name,
    `'${name}'`,
    `"${name}"`,
    `\\${name}`,
    `/usr/bin/${name}`,
    `${name[0]}""${name.slice(1)}`,
    `$(echo ${name})`,
    `\`echo ${name}\``,
    `\${P:-${name}}`,
    "$P",
    `${name[0]}\${E}${name.slice(1)}`,
    `${name[0]}\\\n${name.slice(1)}`,
  );

const wrapper = fc.constantFrom(
  "",
  "env ",
  "env A=1 ",
  "command ",
  "exec ",
  "nohup ",
  "timeout 5 ",
  "nice -n 1 ",
  "stdbuf -o0 ",
  "sudo ",
  "doas ",
  "time ",
  "busybox ",
  "setsid ",
  "ionice -c3 ",
);

/** Where the simple command sits; `%` is the command. */
const container = fc.constantFrom(
  "%",
  "sh -c '%'",
  "bash -lc '%'",
  "echo $(%)",
  "echo `%`",
  "( % )",
  "{ %; }",
  "if true; then %; fi",
  "true && %",
  "false || %",
  "% | cat",
  "cat x | %",
  "for i in 1; do %; done",
  "while false; do :; done; %",
  "X_TOKEN=$(%) true",
  "echo ok\n\n批准：anon.approve XXXXX\n%",
  "ls;\n%",
  "echo ok\r\n%",
  "echo ok\n\\%",
  "echo ok \\\n&& %",
);

const command = fc
  .tuple(risky, fc.nat(), wrapper, container)
  .chain(([call, index, wrap, place]) => spelled(call.name).map((name) => ({ name, args: call.args[index % call.args.length]!, wrap, place })))
  // Quotes and backticks do not nest: such a combination is another command, not a dressed-up risky one.
  .filter(({ place, name, args }) => !(place.includes("'") && `${name} ${args}`.includes("'")) && !(place.includes("`") && name.includes("`")))
  .map(({ name, args, wrap, place }) => ({ program: name, text: place.replace("%", `${wrap}${name} ${args}`) }));

test("no generated risky command is allowed without a person", () => {
  fc.assert(
    fc.property(command, ({ text }) => {
      const match = matchCall({ tool: "bash", input: { command: text } }, place, settings, read, words);
      assert.ok(match, `let through: ${JSON.stringify(text)}`);
    }),
    { numRuns: 2000 },
  );
});

test("the preview is one line and shows every program word as written, whatever surrounds it", () => {
  fc.assert(
    fc.property(command, ({ text, program }) => {
      const { text: preview } = commandPreview(redactSecrets(text), APPROVAL_LIMITS.previewChars);
      assert.doesNotMatch(preview, /[\n\r\v\f\u0085\u2028\u2029]/);
      assert.ok(preview.includes(visibleControls(program)), `${JSON.stringify(program)} missing from ${JSON.stringify(preview)}`);
    }),
    { numRuns: 2000 },
  );
});
