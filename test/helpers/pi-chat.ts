/**
 * The owner's chat and a real Pi session together: a Koishi app with notify-webhook and plugin-mock
 * chat (harness/chat.ts), and a REAL Pi session with this extension pointed at it, optionally with
 * a user config. Everything is stopped, and the environment restored, after the test.
 */
import type { TestContext } from "node:test";
import { rmSync } from "node:fs";
import { startChat } from "../../harness/chat.ts";
import { extensionEnv, writeUserConfig } from "../../harness/extension-env.ts";
import { makeRoot, startPi, type StartPiOptions } from "../../harness/pi.ts";

export async function piOnChat(t: TestContext, options: StartPiOptions & { userConfig?: Record<string, unknown> } = {}) {
  const { userConfig, ...piOptions } = options;
  const chat = await startChat();
  const root = makeRoot();
  const saved = { ...process.env };
  Object.assign(process.env, extensionEnv(chat, root));
  if (userConfig) writeUserConfig(root, userConfig);
  const pi = await startPi({ root, ...piOptions });
  t.after(async () => {
    await pi.dispose({ keepRoot: true }).catch(() => undefined);
    await chat.stop();
    process.env = saved;
    rmSync(root, { recursive: true, force: true });
  });
  return { chat, pi };
}
