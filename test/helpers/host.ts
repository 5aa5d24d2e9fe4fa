/** The host process in tests: a machine with a root, a `pi` on PATH that is the pinned Pi with this extension, and the host on the pinned Node. */
import { type ChildProcess, spawn } from "node:child_process";
import { chmodSync, mkdirSync, symlinkSync, writeFileSync } from "node:fs";
import { delimiter, join } from "node:path";
import { startChat } from "../../harness/chat.ts";
import { waitUntil } from "../../harness/wait.ts";
import { configureExtension } from "../../harness/webhook.ts";
import { closeConsolePages } from "../../server/console/index.ts";
import { withConsole } from "./console.ts";
import { PI_CLI, PINNED_NODE, type PiHome, REPO, stubbedPiHome } from "./pi-cli.ts";

export const HOST_CLI = join(REPO, "host/cli.ts");
export const UUID = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/;

export interface RunningHost {
  child: ChildProcess;
  log: () => string;
  /** SIGKILL to the host's process group: the host and the Pi sessions it started. */
  kill(): void;
}

/** A root with one project, a link out of it, and a `pi` on PATH that is the pinned Pi with this extension. */
export function machine(home: PiHome) {
  const code = join(home.root, "code");
  mkdirSync(join(code, "shop"), { recursive: true });
  mkdirSync(join(home.root, "elsewhere"));
  symlinkSync(join(home.root, "elsewhere"), join(code, "escape"));
  const bin = join(home.root, "bin");
  mkdirSync(bin);
  writeFileSync(join(bin, "pi"), `#!/bin/sh\nexec "${PINNED_NODE}" "${PI_CLI}" -e "${REPO}" "$@"\n`);
  chmodSync(join(bin, "pi"), 0o755);
  return { code, env: { ...home.env, PATH: [bin, home.env.PATH].join(delimiter) } };
}

export async function startHost(t: { after(fn: () => unknown): void }, env: Record<string, string>, args: string[]): Promise<RunningHost> {
  const child = spawn(PINNED_NODE, [HOST_CLI, ...args], { env, detached: true, stdio: ["ignore", "ignore", "pipe"] });
  let log = "";
  child.stderr!.setEncoding("utf8").on("data", (chunk: string) => (log += chunk));
  const host: RunningHost = {
    child,
    log: () => log,
    kill: () => {
      try {
        process.kill(-child.pid!, "SIGKILL");
      } catch {
        // Already gone.
      }
    },
  };
  t.after(() => host.kill());
  await waitUntil(
    () => log.includes("registered as"),
    () => `the host to register\n${log}`,
    30_000,
  );
  return host;
}

/** A chat server, the stub model and a Pi home configured for it, and the machine; `config` goes over the plugin's. */
export async function setUp(t: { after(fn: () => Promise<void>): void }, config: Record<string, unknown> = {}) {
  const withPage = typeof config.consoleToken === "string";
  const server = await startChat({
    config: { sessionHeartbeatTimeoutMs: 4_000, commandLeaseMs: 2_000, ...config },
    ...(withPage ? { plugins: (use) => withConsole(use) } : {}),
  });
  if (withPage) t.after(() => closeConsolePages(server.app));
  const { model, home } = await stubbedPiHome(t, () => server.stop());
  configureExtension(home.root, `${server.baseUrl}/events`, { presence: { heartbeatIntervalMs: 1_000 } }, server.token);
  return { server, model, home, ...machine(home) };
}
