/**
 * Pointing the extension at a real notify-webhook server for end-to-end tests: the environment it
 * reads (agent folder, endpoint, token, recipient) and the user config file under the agent folder.
 */
import { mkdirSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dataDirFor } from "../extension/config/config.ts";
import type { KoishiHarness } from "./koishi.ts";

export const RECIPIENT = { qq: "10001", anonQq: "10002" };

/** The ANON_NOTIFY_* variables and PI_CODING_AGENT_DIR for a Pi root made with makeRoot(). */
export function extensionEnv(koishi: KoishiHarness, root: string): Record<string, string> {
  return {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: koishi.token,
    ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
    ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
  };
}

/** Writes `<agent>/extension-data/anon-notify/config.json` (the stable user config layer). */
export function writeUserConfig(root: string, config: Record<string, unknown>): void {
  const dataDir = dataDirFor(join(root, "agent"));
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, "config.json"), JSON.stringify(config));
}
