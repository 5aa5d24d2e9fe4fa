/**
 * Pointing the extension at a real notify-webhook server for end-to-end tests: the environment it
 * reads (agent folder, endpoint, token, recipient) and the user config file under the agent folder.
 */
import { mkdirSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { dataDirFor } from "../extension/config/config.ts";
import { operatorApi } from "./agent-api.ts";
import { closeAll } from "./cleanup.ts";
import type { KoishiHarness } from "./koishi.ts";
import { makeRoot, startPi, type PiHarness, type StartPiOptions } from "./pi.ts";
import { waitUntil } from "./wait.ts";

export const RECIPIENT = { qq: "10001", anonQq: "10002" };

/** The ANON_NOTIFY_* variables and PI_CODING_AGENT_DIR for a Pi root made with makeRoot(), for a server at `baseUrl` with the agents' `token`. */
export function extensionEnv(koishi: Pick<KoishiHarness, "baseUrl" | "token">, root: string): Record<string, string> {
  return {
    PI_CODING_AGENT_DIR: join(root, "agent"),
    ANON_NOTIFY_ENDPOINT: `${koishi.baseUrl}/events`,
    ANON_NOTIFY_TOKEN: koishi.token,
    ANON_NOTIFY_RECIPIENT_QQ: RECIPIENT.qq,
    ANON_NOTIFY_ANON_QQ: RECIPIENT.anonQq,
  };
}

/**
 * A real Pi session pointed at `server` for one test: a fresh root, the environment set, the user
 * config written. After the test the session, the environment, the server and the root all go,
 * each even if another fails; registered before Pi starts, so a start that throws leaves nothing
 * running to keep the test file alive.
 */
export async function piOnServer(
  t: { after(fn: () => Promise<void>): void },
  server: KoishiHarness,
  options: Omit<StartPiOptions, "root"> & { userConfig?: Record<string, unknown> } = {},
): Promise<PiHarness> {
  const { userConfig, ...piOptions } = options;
  const root = makeRoot();
  const saved = { ...process.env };
  let pi: PiHarness | undefined;
  t.after(() =>
    closeAll(
      () => pi?.dispose({ keepRoot: true }),
      () => void (process.env = saved),
      server.stop,
      () => rmSync(root, { recursive: true, force: true }),
    ),
  );
  Object.assign(process.env, extensionEnv(server, root));
  if (userConfig) writeUserConfig(root, userConfig);
  pi = await startPi({ root, ...piOptions });
  return pi;
}

/** Writes `<agent>/extension-data/anon-notify/config.json` (the stable user config layer). */
export function writeUserConfig(root: string, config: Record<string, unknown>): void {
  const dataDir = dataDirFor(join(root, "agent"));
  mkdirSync(dataDir, { recursive: true });
  writeFileSync(join(dataDir, "config.json"), JSON.stringify(config));
}

/** Resolves once the operator API lists `pi`'s session as online on `server`. */
export async function listedOnline(server: KoishiHarness, pi: PiHarness, timeoutMs = 15_000): Promise<void> {
  const sessionId = pi.session.sessionManager.getSessionId();
  await waitUntil(
    async () => (await operatorApi(server).sessions()).body.sessions.some((s: { session_id: string }) => s.session_id === sessionId),
    "the session online",
    timeoutMs,
  );
}
