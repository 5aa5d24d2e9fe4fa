/**
 * A Pi process for tests that must kill one: the extension loaded from the package root in a REAL
 * Pi session (SDK + faux model), switched on with `/anon-notify`, then running a tool that never
 * returns. Prints `RUNNING` once the tool has started. Configured by the environment it inherits
 * (ANON_NOTIFY_*, PI_CODING_AGENT_DIR) and PI_CHILD_ROOT, a root made with makeRoot().
 */
import { Type } from "typebox";
import { ai, startPi } from "../../harness/pi.ts";

const root = process.env.PI_CHILD_ROOT;
if (!root) throw new Error("PI_CHILD_ROOT is required");
const pi = await startPi({
  root,
  tools: [
    {
      name: "hang",
      label: "hang",
      description: "Never returns.",
      parameters: Type.Object({}),
      execute: () => new Promise(() => {}),
    },
  ],
});
await pi.prompt("/anon-notify");
pi.session.subscribe((event) => {
  if (event.type === "tool_execution_start") process.stdout.write("RUNNING\n");
});
pi.script([ai.fauxAssistantMessage([ai.fauxToolCall("hang", {})], { stopReason: "toolUse" })]);
void pi.prompt("hang forever");
