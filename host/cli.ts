#!/usr/bin/env node
/** `anon-notify-host`: the endpoint and agent token come from the extension's own config (files and ANON_NOTIFY_* variables). */
import { hostname } from "node:os";
import { join } from "node:path";
import { parseArgs } from "node:util";
import { errorText } from "../common/errors.ts";
import { HostName } from "../protocol/hosts.ts";
import { openCommandJournal } from "../extension/command-channel/journal.ts";
import { agentDirFrom, dataDirFor, expandHome, loadConfig, readToken } from "../extension/config/config.ts";
import { createWebhookClient } from "../extension/server-client/http-client.ts";
import { messagesFor } from "../extension/texts/messages.ts";
import { Host } from "./host.ts";
import { findProgram } from "./pi-process.ts";
import { resolveRoots } from "./projects.ts";

const USAGE = "usage: anon-notify-host --root <folder> [--root <folder>…] [--name <name>] [--pi <path>] [--max-sessions <n>]";

function fail(message: string): never {
  process.stderr.write(`anon-notify-host: ${message}\n${USAGE}\n`);
  process.exit(2);
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      root: { type: "string", multiple: true },
      name: { type: "string" },
      pi: { type: "string" },
      "max-sessions": { type: "string" },
      help: { type: "boolean" },
    },
  });
  if (values.help) return void process.stdout.write(`${USAGE}\n`);
  if (!values.root?.length) fail("at least one --root is needed");
  const roots = resolveRoots(values.root.map((root) => expandHome(root)));
  // The machine's name by default: what `#host` in chat matches.
  const name = HostName.safeParse(values.name ?? (hostname().split(".")[0] || "host").replace(/[^A-Za-z0-9_-]/g, "-").slice(0, 64));
  if (!name.success) fail(`--name: ${name.error.issues[0]?.message}`);
  const maxSessions = Number(values["max-sessions"] ?? 4);
  if (!Number.isInteger(maxSessions) || maxSessions < 1) fail("--max-sessions must be a whole number of at least 1");

  const loaded = loadConfig({ cwd: process.cwd(), env: process.env });
  if (!loaded.ok) fail(`the anon-notify config is invalid: ${loaded.errors.join("; ")}`);
  const token = readToken(loaded.config, process.env, messagesFor(loaded.language));
  if (!token) fail("no agent token: set ANON_NOTIFY_TOKEN or the extension's token / tokenFile");
  const piPath = findProgram(values.pi ?? "pi", process.env);
  const { journal } = await openCommandJournal(join(dataDirFor(agentDirFrom(process.env)), "host-journal.jsonl"));
  const client = createWebhookClient({ endpoint: loaded.config.endpoint, token, timeoutMs: loaded.config.delivery.timeoutMs });
  const log = (line: string) => process.stderr.write(`anon-notify-host: ${line}\n`);
  if (!piPath) log(`Pi not found (${values.pi ?? "pi on PATH"}): every start will be refused pi_not_found`);
  const host = new Host({ client, journal, roots, name: name.data, pi: piPath ? { program: piPath, args: [] } : null, maxSessions, env: process.env, log });
  for (const signal of ["SIGINT", "SIGTERM"] as const) process.once(signal, () => host.stop());
  await host.run();
  await client.close();
}

main().catch((error: unknown) => fail(errorText(error)));
