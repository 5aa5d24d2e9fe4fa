/** Shared by the command-channel tests: a tool the test releases, the delivered command messages, settle waits. */
import type { ToolDefinition } from "@earendil-works/pi-coding-agent";
import { Type } from "typebox";
import { COMMAND_MESSAGE_TYPE } from "../extension/command-channel/instruction-message.ts";
import { latch, type PiHarness } from "./pi.ts";

/** A tool that runs until the test releases it. */
export function gatedTool(name: string) {
  const started = latch();
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const tool: ToolDefinition = {
    name,
    label: name,
    description: "Runs until released.",
    parameters: Type.Object({}),
    async execute() {
      started.signal();
      await released;
      return { content: [{ type: "text", text: `${name} done` }], details: undefined };
    },
  };
  return { tool, started: started.promise, release: () => release() };
}

/** The command messages in the session file's entries, all branches. */
export function commandMessages(pi: PiHarness) {
  return pi.session.sessionManager
    .getEntries()
    .filter((e) => e.type === "custom_message" && e.customType === COMMAND_MESSAGE_TYPE)
    .map((e) => e as { content: unknown; details: { command_id: string } });
}

/** Resolves after Pi settles `count` runs from now. */
export function settled(pi: PiHarness, count = 1): Promise<void> {
  return new Promise((resolve) => {
    let seen = 0;
    const off = pi.session.subscribe((event) => {
      if (event.type === "agent_settled" && ++seen === count) {
        off();
        resolve();
      }
    });
  });
}
