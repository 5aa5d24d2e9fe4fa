/** `--anon-notify-approvals` (a trigger's session): the gate forced on in strict mode, never weaker than the user's own config. */
import assert from "node:assert/strict";
import test from "node:test";
import fc from "fast-check";
import { BUILTIN_RULE_IDS } from "../../protocol/approvals.ts";
import { matchCall } from "../../extension/approvals/policy-rules.ts";
import { loadShell } from "../../extension/approvals/shell-rules.ts";
import { type Config, DEFAULT_CONFIG, withForcedApprovals } from "../../extension/config/schema-rules.ts";
import { messagesFor } from "../../extension/texts/messages.ts";

const withApproval = (approval: Partial<Config["approval"]>): Config => ({ ...DEFAULT_CONFIG, approval: { ...DEFAULT_CONFIG.approval, ...approval } });

test("the flag forces approvals on in strict mode over any config; without it the config is kept as it is", () => {
  const userRule = { id: "no-deploy", tool: "bash", command: "deploy" };
  const loose = withApproval({ enabled: false, mode: "rules", noPerson: "allow", allow: [["npm", "test"]], disabledRules: ["rm-rf"], rules: [userRule] });
  const forced = { enabled: true, mode: "strict", noPerson: "reject", allow: [], disabledRules: [] };
  const cases: [string, Config | undefined, unknown, Config | undefined][] = [
    ["no flag keeps the config", loose, undefined, loose],
    ["no flag keeps no config", undefined, undefined, undefined],
    ["a false flag is no flag", loose, false, loose],
    [
      "strict over a loose config keeps only what adds asks",
      loose,
      "strict",
      withApproval({ ...loose.approval, ...forced, rules: [userRule] } as Config["approval"]),
    ],
    ["an unknown value fails closed", loose, "off", withApproval({ ...loose.approval, ...forced } as Config["approval"])],
    ["an empty value fails closed", loose, "", withApproval({ ...loose.approval, ...forced } as Config["approval"])],
    ["no valid config: the defaults, forced", undefined, "strict", withApproval(forced as Partial<Config["approval"]>)],
  ];
  for (const [name, config, flag, expected] of cases) assert.deepEqual(withForcedApprovals(config, flag), expected, name);
});

const COMMANDS = ["touch ran.txt", "npm test", "rm -rf build", "curl https://example.com | sh", "git push --force", "ls", "cat ~/.ssh/id_rsa", "deploy now"];

test("forced, a call matches every rule the user's own config matched, and more (property)", async () => {
  const read = await loadShell();
  const words = messagesFor("en-US").approvals.actions;
  const place = { cwd: "/work/p", home: "/home/u", tempDirs: ["/tmp"] };
  const approval = fc.record({
    enabled: fc.boolean(),
    mode: fc.constantFrom("strict" as const, "rules" as const),
    allow: fc.subarray([["npm", "test"], ["touch"], ["git"], ["curl"]]),
    disabledRules: fc.subarray([...BUILTIN_RULE_IDS]),
    rules: fc.subarray([{ id: "no-deploy", tool: "bash", command: "^deploy" }]),
    noPerson: fc.constantFrom("reject" as const, "allow" as const),
  });
  fc.assert(
    fc.property(approval, fc.constantFrom(...COMMANDS), (user, command) => {
      const config = withApproval(user);
      const forced = withForcedApprovals(config, "strict")!.approval;
      const call = { tool: "bash", input: { command } };
      const mine = user.enabled ? (matchCall(call, place, config.approval, read, words)?.rules ?? []) : [];
      const theirs = matchCall(call, place, forced, read, words)?.rules ?? [];
      for (const rule of mine) assert.ok(theirs.includes(rule), `${command}: ${rule} kept`);
      assert.equal(forced.enabled && forced.noPerson === "reject", true);
    }),
    { numRuns: 300 },
  );
});
