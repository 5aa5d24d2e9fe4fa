/**
 * The owner's chat and a real Pi session together: a Koishi app with notify-webhook and plugin-mock
 * chat (harness/chat.ts), and a REAL Pi session with this extension pointed at it, optionally with
 * a user config. Everything is stopped, and the environment restored, after the test.
 */
import type { TestContext } from "node:test";
import { startChat } from "../../harness/chat.ts";
import { piOnServer } from "../../harness/extension-env.ts";
import type { StartPiOptions } from "../../harness/pi.ts";

export async function piOnChat(t: TestContext, options: Omit<StartPiOptions, "root"> & { userConfig?: Record<string, unknown> } = {}) {
  const chat = await startChat();
  const pi = await piOnServer(t, chat, options);
  return { chat, pi };
}
